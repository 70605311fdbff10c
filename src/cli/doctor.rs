//! The options of `collbench doctor` (docs/doctor.md).

use std::path::PathBuf;

use clap::Args;

/// Read NCCL logs and name what is misconfigured, with the evidence lines and the fix
#[derive(Debug, Args)]
#[command(
    after_help = "LOG is a job's output, one rank's NCCL_DEBUG_FILE, a folder of them (read \
recursively), a gzip file, or - for standard input; launcher prefixes ([rank0]:, [1,0]<stdout>:, \
srun's N:, pdsh's host:), timestamps, Markdown quoting and interleaved ranks are read as they \
come. NCCL_DEBUG=INFO gives the doctor the most to judge; what it could not judge is said, with \
the NCCL_DEBUG_SUBSYS that prints it. Rules, their evidence lines per NCCL release and the cited \
fixes: docs/doctor.md.\n\n\
Examples:\n  \
collbench doctor job.out\n  \
collbench doctor logs/nccl.*.log\n  \
NCCL_DEBUG=INFO torchrun ... 2>&1 | collbench doctor -\n  \
collbench doctor --json logs/ > findings.json",
    args_override_self = true
)]
pub struct DoctorArgs {
    /// NCCL logs: files, folders, gzip files, or - for standard input
    #[arg(value_name = "LOG", required = true)]
    pub logs: Vec<PathBuf>,

    /// Print the findings as JSON (every evidence line) instead of the report
    #[arg(long)]
    pub json: bool,
}
