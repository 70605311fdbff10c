//! The integration tests: one harness, so the crate links once and every
//! module shares `common` (the real binary, the real `mpirun`, real files).
//! Run one module with `cargo test --test it <module>::`.

mod common;

mod check;
mod ci_script;
mod cli;
mod compare;
mod corpus;
mod doctor;
mod fake_nodes;
mod faults;
mod gpu_sim;
mod hierarchy;
mod import;
mod launch;
mod links;
mod measurement;
mod mpi_sweep;
mod nccl;
mod nccl_parity;
mod nccl_sim;
mod option_errors;
mod plot;
mod slurm;
mod split;
mod transports;
mod ux;
mod workload;
