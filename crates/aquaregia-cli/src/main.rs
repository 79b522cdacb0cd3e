//! The `aquaregia` command line.

fn main() {}
