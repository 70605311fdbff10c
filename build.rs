//! Build script: with the `mpi` feature, compiles the few lines of C that
//! read MPI_IN_PLACE from the MPI headers. It is a macro (`(void *) 1` in
//! Open MPI, `(void *) -1` in MPICH) that neither rsmpi nor its bindings
//! expose, and the in-place variants of the MPI collectives need it.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    #[cfg(feature = "mpi")]
    mpi_shim();
}

#[cfg(feature = "mpi")]
fn mpi_shim() {
    println!("cargo:rerun-if-changed=src/backend/mpi/in_place_shim.c");
    let lib = match build_probe_mpi::probe() {
        Ok(lib) => lib,
        Err(errors) => {
            for e in errors {
                println!("cargo:warning=MPI probe: {e}");
            }
            panic!(
                "no MPI library found: install Open MPI (Debian/Ubuntu: apt-get install libopenmpi-dev openmpi-bin) \
                 or build without MPI (--no-default-features)"
            );
        }
    };
    let mut build = cc::Build::new();
    build.file("src/backend/mpi/in_place_shim.c");
    match lib.mpicc {
        Some(mpicc) => {
            build.compiler(mpicc);
        }
        None => {
            for dir in &lib.include_paths {
                build.include(dir);
            }
        }
    }
    build.compile("collbench_mpi_shim");
}
