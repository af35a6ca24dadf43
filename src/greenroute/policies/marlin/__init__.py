"""MARLIN (seed 001): per-objective SAC agents and the phase-2 game."""
