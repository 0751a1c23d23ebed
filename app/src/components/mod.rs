//! Parts more than one page uses: the SVG charts, the form fields with their checks, and the
//! measured-service picker.

pub mod charts;
pub mod form;
pub mod grid_picker;
pub mod llm_check;
pub mod service_picker;
