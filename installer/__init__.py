"""Packaging: one shared spec (app_spec.toml) rendered into each platform's recipe,
and the Linux bundle that `make dist` builds. Not part of the installed app."""
