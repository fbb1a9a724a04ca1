/* Ring test for integration/test_mpi.py: a token travels once around all ranks, each rank adding
 * (its rank + 1); rank 0 prints the total, which must be size*(size+1)/2.
 *
 * Every rank prints "rank R of N on HOST". Options (after the program name):
 *   --exit CODE          rank 0 returns CODE after MPI_Finalize
 *   --die RANK CODE      after a barrier (every rank has wired up), RANK calls exit(CODE) before the
 *                        ring, without MPI_Finalize
 *   --signal RANK SIG    RANK raises SIG before the ring
 *   --abort RANK CODE    after a barrier, RANK calls MPI_Abort(MPI_COMM_WORLD, CODE)
 *   --hold DIR           after the ring every rank writes DIR/rank-R (its host and pid) and sleeps
 */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    int rank, size, exit_code = 0, die_rank = -1, die_code = 0, sig_rank = -1, sig = 0;
    int abort_rank = -1, abort_code = 0;
    const char *hold = NULL;
    char host[256];

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--exit") && i + 1 < argc) {
            exit_code = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--die") && i + 2 < argc) {
            die_rank = atoi(argv[++i]);
            die_code = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--signal") && i + 2 < argc) {
            sig_rank = atoi(argv[++i]);
            sig = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--abort") && i + 2 < argc) {
            abort_rank = atoi(argv[++i]);
            abort_code = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--hold") && i + 1 < argc) {
            hold = argv[++i];
        }
    }
    gethostname(host, sizeof host);
    host[sizeof host - 1] = '\0';
    printf("rank %d of %d on %s\n", rank, size, host);
    fflush(stdout);
    if (die_rank >= 0 || abort_rank >= 0) {
        MPI_Barrier(MPI_COMM_WORLD);
    }
    if (rank == die_rank) {
        exit(die_code);
    }
    if (rank == sig_rank) {
        raise(sig);
    }
    if (rank == abort_rank) {
        MPI_Abort(MPI_COMM_WORLD, abort_code);
    }

    long token = 0;
    if (size == 1) {
        token = 1;
    } else if (rank == 0) {
        token = 1;
        MPI_Send(&token, 1, MPI_LONG, 1, 0, MPI_COMM_WORLD);
        MPI_Recv(&token, 1, MPI_LONG, size - 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
        MPI_Recv(&token, 1, MPI_LONG, rank - 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        token += rank + 1;
        MPI_Send(&token, 1, MPI_LONG, (rank + 1) % size, 0, MPI_COMM_WORLD);
    }
    if (rank == 0) {
        printf("ring sum %ld over %d ranks\n", token, size);
        fflush(stdout);
    }
    if (hold) {
        char path[4096];
        snprintf(path, sizeof path, "%s/rank-%d", hold, rank);
        FILE *f = fopen(path, "w");
        if (f) {
            fprintf(f, "%s %d\n", host, (int)getpid());
            fclose(f);
        }
        for (;;) {
            pause();
        }
    }
    MPI_Finalize();
    return rank == 0 ? exit_code : 0;
}
