"""Model co-hosting in one container (seed 003's ``model_cohost_server``): the server that runs several vLLM instances
as child processes and routes requests to them by model name (``server``), shipped into the serving pods."""
