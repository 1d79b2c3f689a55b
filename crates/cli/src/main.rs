fn main() { eprintln!("vramcalc: not built yet"); std::process::exit(2); }
