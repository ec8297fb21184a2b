//! tcpdoctor-capture: see Cargo.toml description. Filled in by its issue.
