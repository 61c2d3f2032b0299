"""The content-addressed blob cache (docs/cache.md): native hashing and batch
rewriting, the serving agent's blob store, the client agent's knowledge of
what each server holds."""
