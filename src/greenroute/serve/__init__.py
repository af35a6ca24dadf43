"""The live gateway: OpenAI-compatible routing of real traffic with the simulator's policies
(DESIGN "The gateway"). Needs the ``[serve]`` extra."""
