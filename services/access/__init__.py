"""Authentication and authorization drivers: the ACL file store, the admin gate, the ACL admin service."""
