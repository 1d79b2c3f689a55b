fn main() { eprintln!("vramcalc-verify: not built yet"); std::process::exit(2); }
