#![allow(dead_code)]
pub mod kafka;
pub mod strait;
