//! One integration-test binary: every test drives the real binaries in temp dirs.

mod support;

mod agents;
mod api;
mod archive;
mod bridge;
mod builder;
mod core_queue;
mod core_send;
mod costs;
mod crash;
mod daemon;
mod examples;
mod faults;
mod forum;
mod hardening;
mod holds;
mod hostile;
mod ingest;
mod launcher;
mod layouts;
mod longpoll;
mod mcp;
mod model;
mod newcomer;
mod order;
mod panes;
mod perf;
mod preamble;
mod readme;
mod real_agents;
mod serve;
mod teardown;
mod trail;
mod trust;
mod unix;
