// corun-torch-worker: one torch testbed worker process. The parent (the torch testbeds in the
// corun binary) starts it and talks to it over stdin/stdout (protocol in protocol.h).
#include "corun/torchbed/torchbed.h"

int main() { return corun::torch_worker_main(0, 1); }
