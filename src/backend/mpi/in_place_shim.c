/* MPI_IN_PLACE is a macro whose value differs between MPI implementations;
 * this returns the one of the headers collbench was built against. */
#include <mpi.h>

void *collbench_mpi_in_place(void) { return MPI_IN_PLACE; }
