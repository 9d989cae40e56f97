#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> std::process::ExitCode {
    // First, before the arguments, the environment or a thread (`make_non_dumpable` says why).
    if let Err(err) = ocifit::cli::make_non_dumpable() {
        eprintln!("ocifit: failed to make the process non-dumpable: {err}");
        return std::process::ExitCode::FAILURE;
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("ocifit: failed to start the runtime: {err}");
            return std::process::ExitCode::FAILURE;
        }
    };
    runtime.block_on(ocifit::cli::run(ocifit::cli::Cli::parse_invoked()))
}
