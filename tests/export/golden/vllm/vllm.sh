#!/bin/sh
# vLLM launch commands, one server per LLM (flags: docs.vllm.ai, Engine Arguments).
# Plan: served plan 12 (reason: demand cam) (golden/served-plan.json).
# Workload: golden/workload.yaml on rtx3090 (NVIDIA GeForce RTX 3090, 25.77 GB).
# Written by `corun export`, corun TEST.
# Not served by vLLM:
#   cam: yolo11n, imgsz=640,skip_rate=0.33,batch=4,sm_share=50 (vision: Triton, see --format triton)
#   enc: bert-base, batch=8 (encoder: Triton, see --format triton)
#   asr: whisper-small, no searched knob (speech: Triton, see --format triton)

# chat: qwen2.5-0.5b, precision=awq,request_concurrency=32,prefill_chunk=16
# VRAM budget 0.989 GB; 1.668 GB with the KV cache of 32 sequences at --max-model-len
# --gpu-memory-utilization x 25.77 GB = 1.675 GB; its MPS memory limit adds 512 MiB for CUDA graphs
vllm serve Qwen/Qwen2.5-0.5B-Instruct-AWQ \
  --served-model-name chat \
  --port 8000 \
  --dtype float16 \
  --quantization awq \
  --max-num-seqs 32 \
  --enable-chunked-prefill \
  --max-num-batched-tokens 32 \
  --max-model-len 2048 \
  --gpu-memory-utilization 0.065 &
wait
