"""How Slurm 22.05's submitting commands introduce a refusal by the controller (no imports: the
query commands' start-up loads it)."""

SUBMIT_FAILED = {
    "sbatch": "Batch job submission failed: ",
    "srun": "Unable to allocate resources: ",
    "salloc": "Job submit/allocate failed: ",
}
