use clap::Parser;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    ocifit::cli::run(ocifit::cli::Cli::parse()).await
}
