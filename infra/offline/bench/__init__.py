"""``llm-serving bench``: measure one replica's throughput at the latency objectives (θ_o, θ_i).

The capacity planner (infra/planning/capacity.py) sizes replicas and cost only from *measured* tokens
per second, read at the contract's TTFT/ITL objectives. This package produces that measurement:

- ``target``   the facts of what is measured (release, image, vLLM args, accelerator, contract), as primitives;
- ``workload`` prompt/output length distributions fitted to the contract, the shared prefix and the priority mix;
- ``runner``   guidellm as a subprocess: open-loop Poisson arrivals, one run per offered rate (and class);
- ``scrape``   the server's Prometheus ``/metrics`` sampled during each run (queue depth, KV-cache usage);
- ``analysis`` per-rate percentiles, goodput, throughput, and the operating point;
- ``record``   the schema-validated measurement record (schema in infra/config/measurement.py);
- ``plots``    latency and goodput versus offered load;
- ``cli``      the ``bench`` subcommand.

Load generation is guidellm's (vllm-project); this package only configures it, runs it, and reads its JSON.
"""
