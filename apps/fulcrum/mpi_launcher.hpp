// Starting this binary again under mpiexec (`fulcrum run`, `prefill` and `bench comm` started without
// it), tied so that no process of the job outlives the launcher, with the job's errors as one line.
#pragma once

namespace fulcrum::cli {

/// The arguments this process was started with (set by main), to re-launch it under mpiexec.
void set_command_line(int argc, char** argv);

/// Whether this process was started by mpiexec.
bool started_by_mpiexec();

/// Runs this binary with the same arguments under `mpiexec -n ranks` and returns its exit code.
/// SIGINT, SIGTERM and SIGHUP are forwarded to mpiexec (SIGKILL after a grace period if it does not
/// end), after which this process ends by the same signal; mpiexec ends if this process dies, even by
/// SIGKILL. mpiexec's banners are kept out of stderr and the job's failure comes out as one line naming
/// the rank (FULCRUM_MPI_VERBOSE=1 passes mpiexec's stderr through unchanged).
int relaunch_under_mpiexec(int ranks);

/// Called first thing in main: in a rank started by relaunch_under_mpiexec, ties the rank's life to its
/// mpiexec (the kernel kills the rank when mpiexec ends); elsewhere does nothing.
void tie_rank_to_launcher();

}  // namespace fulcrum::cli
