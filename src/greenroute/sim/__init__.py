"""The simulation engine: types, cluster, kernel, fluid model, results."""
