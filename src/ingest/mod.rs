//! Data into the embedded `events` log: JSON lines ([`produce`]), real
//! network data ([`import`]), generated networks ([`generate`]).

pub mod generate;
pub mod import;
pub mod produce;
