//! Thin shell: everything happens in `collbench::app`.

fn main() -> std::process::ExitCode {
    collbench::app::main()
}
