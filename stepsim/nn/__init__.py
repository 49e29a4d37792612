"""A small autograd-free neural-network engine: forward/backward pairs and an MLP builder.

``stepsim.nn.layers`` holds the layers and losses (pure functions, NamedTuple caches).
Problems build their models from these; nothing here imports recipes or training.
"""
