"""Reinforcement learning (extra ``[rl]``): training, saved models, RL-backed policies."""
