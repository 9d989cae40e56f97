mod choice;
mod containers;
mod fixtures;
mod outcomes;
mod patching;
mod property;
mod skips;
