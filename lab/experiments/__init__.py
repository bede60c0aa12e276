"""The lab's experiments, one module each: the runs an experiment page trains, the figures it reads from them, the
comparisons over seeds and the sentences it says (induction heads, attention sinks, grokking, the regimes of depth,
wide heads and the learning rate with their stability figures).

May import attncore, lab's comparisons and statistics (compare, stats), its formats and the store's records
(lab.store.RunRecord); never the job runtime or any UI library (the contracts in pyproject.toml say so)."""
