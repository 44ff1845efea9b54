"""Sans-IO cores of M2C: dynamic groups, the sequencer, the application
scheduler, receiver congestion control and the file transfer state machines.
No sockets, no clocks: time is passed in."""
