//! Walls: no prompt, user or peer can exhaust, crash or poison the services. Each test hits
//! one limit and shows the service still healthy for everyone else.

mod capacity;
mod gateway;
mod http;
mod sandbox;
mod shares;
mod tools;
