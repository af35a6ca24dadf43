"""The LLM agent and copilot: language API, datasets, distillation, backends, rules."""
