"""The Hardware panel: what this machine has and where the model and index live."""
