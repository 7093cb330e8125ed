# TEMPLATE of asr/1/model.py, Triton's Python backend for asr: whisper-small, no searched knob
# corun wrote the interface (config.pbtxt: input AUDIO, FP32 16 kHz mono samples; output TEXT,
# one string per utterance) and the class the python_backend README requires
# (TritonPythonModel: initialize, execute, finalize). Loading and running the model is
# yours: complete every FILL IN. Until then initialize() raises, so Triton reports the
# model as failed to load instead of serving made-up answers.
# Plan: served plan 12 (reason: demand cam) (golden/served-plan.json).
# Workload: golden/workload.yaml on rtx3090 (NVIDIA GeForce RTX 3090, 25.77 GB).
# Written by `corun export`, corun TEST.
import json

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        # The plan's precision (config.pbtxt parameters.precision).
        self.precision = config["parameters"]["precision"]["string_value"]
        self.device = "cuda:" + args["model_instance_device_id"]
        # FILL IN: load Whisper small at self.precision on self.device.
        raise NotImplementedError("asr/1/model.py is a corun template: load the model in initialize()")

    def execute(self, requests):
        responses = []
        for request in requests:
            # [batch, samples]: the batch axis comes from max_batch_size > 0.
            audio = pb_utils.get_input_tensor_by_name(request, "AUDIO").as_numpy()
            texts = self.transcribe(audio)
            text = np.array([t.encode("utf-8") for t in texts], dtype=np.object_)
            output = pb_utils.Tensor("TEXT", text.reshape(-1, 1))
            responses.append(pb_utils.InferenceResponse(output_tensors=[output]))
        return responses

    def transcribe(self, audio):
        # FILL IN: one string per row of audio (16 kHz mono float32 samples).
        raise NotImplementedError("asr/1/model.py is a corun template: write transcribe()")

    def finalize(self):
        # FILL IN: release the model; Triton calls this once when it unloads the model.
        pass
