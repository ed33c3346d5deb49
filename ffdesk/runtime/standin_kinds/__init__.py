"""Stand-in builders of the model kinds that have a module of their own
(`ffdesk.runtime.standins.KIND_MODULES`)."""
