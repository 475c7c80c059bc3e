"""Pop consumption core: receipt handles, the in-flight table and delivery decisions (pure)."""
