"""The shared vocabulary of every layer: workload classes, Observation, Plan, ObjectiveWeights,
the objective, typed registries and errors. Imports nothing else of greenroute."""
