"""Render stages the plan plugs into the engine: the embedded swap and the model-based one."""
