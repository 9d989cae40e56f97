mod choice;
mod containers;
pub(crate) mod fixtures;
mod index_reuse;
mod outcomes;
mod patching;
mod placement_key;
pub(crate) mod property;
mod skips;

#[test]
fn the_index_can_be_shared_between_request_handlers() {
    fn shared<T: Send + Sync>() {}
    shared::<super::Index>();
}
