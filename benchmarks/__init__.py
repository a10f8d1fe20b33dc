"""kiln benchmarks: each module times kiln beside its peers in one run and writes benchmarks/results/."""
