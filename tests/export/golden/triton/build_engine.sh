#!/bin/sh -e
# TensorRT engines of this Triton repository: each model's ONNX, then trtexec
# (TensorRT's trtexec: --onnx, --saveEngine, --fp16/--bf16/--int8, --minShapes/
# --optShapes/--maxShapes: one optimisation profile, batch 1 to the plan's batch at the
# plan's input size) into <model>/1/model.plan, where Triton's tensorrt_plan backend
# looks. Not Ultralytics' format=engine: it writes a metadata header before the
# serialized engine, which Triton cannot deserialize. Run it inside the Triton image
# (or with the same TensorRT version), from any directory; SEQ_LEN sets encoders'
# sequence length, ONNX_DIR where the ONNX files go.
# Plan: served plan 12 (reason: demand cam) (golden/served-plan.json).
# Workload: golden/workload.yaml on rtx3090 (NVIDIA GeForce RTX 3090, 25.77 GB).
# Written by `corun export`, corun TEST.
REPO=$(cd "$(dirname "$0")" && pwd)
ONNX_DIR=${ONNX_DIR:-$REPO/onnx}
SEQ_LEN=${SEQ_LEN:-128}
mkdir -p "$ONNX_DIR"

# cam: yolo11n, imgsz=640,skip_rate=0.33,batch=4,sm_share=50
yolo export model=yolo11n.pt format=onnx imgsz=640 dynamic=True
mv yolo11n.onnx "$ONNX_DIR/yolo11n-640.onnx"
mkdir -p "$REPO/cam/1"
trtexec --onnx="$ONNX_DIR/yolo11n-640.onnx" --saveEngine="$REPO/cam/1/model.plan" --fp16 \
  --minShapes="images:1x3x640x640" \
  --optShapes="images:4x3x640x640" \
  --maxShapes="images:4x3x640x640"

# enc: bert-base, batch=8
# ONNX: export BERT-base (uncased) to "$ONNX_DIR/bert-base.onnx" first (torch.onnx.export, or optimum-cli export onnx for Hugging Face models).
test -f "$ONNX_DIR/bert-base.onnx" || { echo "missing $ONNX_DIR/bert-base.onnx" >&2; exit 1; }
# INT8: give trtexec a calibration cache (--calib=FILE) or export a quantized (Q/DQ) ONNX;
# without either the engine runs with placeholder scales.
mkdir -p "$REPO/enc/1"
trtexec --onnx="$ONNX_DIR/bert-base.onnx" --saveEngine="$REPO/enc/1/model.plan" --int8 \
  --minShapes="input_ids:1x${SEQ_LEN},attention_mask:1x${SEQ_LEN},token_type_ids:1x${SEQ_LEN}" \
  --optShapes="input_ids:8x${SEQ_LEN},attention_mask:8x${SEQ_LEN},token_type_ids:8x${SEQ_LEN}" \
  --maxShapes="input_ids:8x${SEQ_LEN},attention_mask:8x${SEQ_LEN},token_type_ids:8x${SEQ_LEN}"
