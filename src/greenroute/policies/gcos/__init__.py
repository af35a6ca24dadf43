"""GCOS (seed 003): cache-aware green scheduling (MACCS) and the DiPTree predictor."""
