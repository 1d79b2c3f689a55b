pub mod generate;
pub mod records;
pub mod reference;
