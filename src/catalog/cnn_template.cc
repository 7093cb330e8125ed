#include "cnn_template.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace corun::detail {
namespace {

/// Shape of one block's output: channels and stride relative to the network input.
struct Tensor {
  int channels = 0;
  int stride = 1;
};

/// Collects convolutions; `stride` arguments are output strides relative to the input.
class Emitter {
 public:
  void conv(int c_in, int c_out, int kernel, int stride, int conv_stride = 1, int groups = 1,
            int repeats = 1) {
    ConvLayer l;
    l.c_in = c_in;
    l.c_out = c_out;
    l.kernel = kernel;
    l.stride = stride;
    l.conv_stride = conv_stride;
    l.groups = groups;
    l.repeats = repeats;
    out_.layers.push_back(l);
  }
  void aux(int kernels) { out_.aux_kernels += kernels; }
  CnnExpansion take() { return std::move(out_); }

 private:
  CnnExpansion out_;
};

/// Ultralytics make_divisible(min(c, max_channels) * width, 8).
int scale_channels(int c, const CnnScale& s) {
  const double scaled = std::min(c, s.max_channels) * s.width;
  return static_cast<int>(std::ceil(scaled / 8.0)) * 8;
}

/// Ultralytics max(round(n * depth), 1) for n > 1; Python rounds half to even, as nearbyint
/// does in the default rounding mode.
int scale_repeats(int n, const CnnScale& s) {
  if (n <= 1) return n;
  return std::max(static_cast<int>(std::nearbyint(n * s.depth)), 1);
}

/// C3k2 (ultralytics block.py): split into two halves of c channels, n inner blocks on one,
/// concatenate all (2 + n) * c, project to c2.
void c3k2(Emitter& e, int c1, int c2, int n, bool c3k, double expand, int stride) {
  const int c = static_cast<int>(c2 * expand);
  e.conv(c1, 2 * c, 1, stride);
  if (c3k) {
    // C3k(c, c, n=2): two 1x1 to c/2, two 3x3 bottlenecks (e=1.0) with shortcut, 1x1 back.
    const int h = c / 2;
    e.conv(c, h, 1, stride, 1, 1, 2 * n);
    e.conv(h, h, 3, stride, 1, 1, 4 * n);
    e.conv(2 * h, c, 1, stride, 1, 1, n);
    e.aux(3 * n);  // two residual adds and one concat per C3k
  } else {
    // Bottleneck(c, c, e=0.5): 3x3 to c/2, 3x3 back, residual add.
    const int h = c / 2;
    e.conv(c, h, 3, stride, 1, 1, n);
    e.conv(h, c, 3, stride, 1, 1, n);
    e.aux(n);
  }
  e.conv((2 + n) * c, c2, 1, stride);
  e.aux(1);  // concat (the split is a view)
}

/// C2PSA (ultralytics block.py): n position-sensitive attention blocks on half the channels.
/// The attention matmuls themselves are not convolutions and, like the published FLOPs
/// (counted by thop over modules), are left out: about 1 % of YOLO11 at 640 px.
void c2psa(Emitter& e, int c1, int n, int stride) {
  const int c = c1 / 2;
  const int heads = std::max(1, c / 64);
  const int head_dim = c / heads;
  const int key_dim = head_dim / 2;  // attn_ratio 0.5
  e.conv(c1, 2 * c, 1, stride);
  e.conv(c, c + 2 * key_dim * heads, 1, stride, 1, 1, n);  // qkv
  e.conv(c, c, 3, stride, 1, c, n);                        // positional encoding, depthwise
  e.conv(c, c, 1, stride, 1, 1, n);                        // proj
  e.conv(c, 2 * c, 1, stride, 1, 1, n);                    // ffn
  e.conv(2 * c, c, 1, stride, 1, 1, n);
  e.aux(6 * n);  // QK^T, softmax, AV, pe add, two residual adds
  e.conv(2 * c, c1, 1, stride);
  e.aux(1);
}

/// Detect (ultralytics head.py, YOLO11 form): per level a box branch (two 3x3, 1x1 to
/// 4 * reg_max) and a class branch (depthwise 3x3, 1x1, depthwise 3x3, 1x1, 1x1 to classes).
void detect(Emitter& e, const std::vector<Tensor>& levels, int classes) {
  constexpr int kRegMax = 16;
  const int ch0 = levels.front().channels;
  const int c2 = std::max({16, ch0 / 4, kRegMax * 4});
  const int c3 = std::max(ch0, std::min(classes, 100));
  for (const Tensor& x : levels) {
    e.conv(x.channels, c2, 3, x.stride);
    e.conv(c2, c2, 3, x.stride);
    e.conv(c2, 4 * kRegMax, 1, x.stride);
    e.conv(x.channels, x.channels, 3, x.stride, 1, x.channels);
    e.conv(x.channels, c3, 1, x.stride);
    e.conv(c3, c3, 3, x.stride, 1, c3);
    e.conv(c3, c3, 1, x.stride);
    e.conv(c3, classes, 1, x.stride);
    e.aux(1);  // per-level concat of box and class outputs
  }
  // Decode: concat levels, DFL softmax and 1x1, distance-to-box (2), sigmoid, final concat.
  e.aux(7);
}

}  // namespace

Result<CnnExpansion> expand_cnn_template(const CnnTemplate& t, const CnnScale& s, int in_channels) {
  Emitter e;
  std::vector<Tensor> outs;
  outs.reserve(t.blocks.size());
  const Tensor image{in_channels, 1};
  for (std::size_t i = 0; i < t.blocks.size(); ++i) {
    const CnnBlock& b = t.blocks[i];
    const std::string where = "template '" + t.name + "' layer " + std::to_string(i);
    std::vector<Tensor> in;
    for (int f : b.from) {
      const long long idx = f < 0 ? static_cast<long long>(i) + f : f;
      if (idx == -1 && f == -1) {
        in.push_back(image);
      } else if (idx < 0 || idx >= static_cast<long long>(i)) {
        return Error(where + ": 'from' " + std::to_string(f) + " does not name an earlier layer");
      } else {
        in.push_back(outs[static_cast<std::size_t>(idx)]);
      }
    }
    if (in.empty()) return Error(where + ": 'from' is empty");
    const int c1 = in.front().channels;
    const int stride = in.front().stride;
    if (c1 <= 0) return Error(where + ": input is a detection head, not a feature map");
    Tensor out{c1, stride};
    switch (b.kind) {
      case CnnBlockKind::kConv:
        out = {scale_channels(b.out, s), stride * b.stride};
        e.conv(c1, out.channels, b.kernel, out.stride, b.stride);
        break;
      case CnnBlockKind::kC3k2:
        out.channels = scale_channels(b.out, s);
        c3k2(e, c1, out.channels, scale_repeats(b.repeats, s), b.c3k || s.force_c3k, b.expand,
             stride);
        break;
      case CnnBlockKind::kSppf: {
        // SPPF: 1x1 to c1/2, three chained k x k max pools, concat of four, 1x1 out.
        out.channels = scale_channels(b.out, s);
        const int h = c1 / 2;
        e.conv(c1, h, 1, stride);
        e.conv(4 * h, out.channels, 1, stride);
        e.aux(4);
        break;
      }
      case CnnBlockKind::kC2psa:
        if (scale_channels(b.out, s) != c1) {
          return Error(where + ": c2psa keeps its channel count, but its input has " +
                       std::to_string(c1) + " and 'out' scales to " +
                       std::to_string(scale_channels(b.out, s)));
        }
        c2psa(e, c1, scale_repeats(b.repeats, s), stride);
        break;
      case CnnBlockKind::kUpsample:
        if (stride < 2) return Error(where + ": upsample above the input resolution");
        out.stride = stride / 2;
        e.aux(1);
        break;
      case CnnBlockKind::kConcat:
        out.channels = 0;
        for (const Tensor& x : in) {
          if (x.stride != stride) {
            return Error(where + ": concat of feature maps at strides " + std::to_string(stride) +
                         " and " + std::to_string(x.stride));
          }
          out.channels += x.channels;
        }
        e.aux(1);
        break;
      case CnnBlockKind::kDetect:
        detect(e, in, b.classes);
        out = {0, 0};
        break;
    }
    outs.push_back(out);
  }
  e.aux(2);  // input letterbox/normalise and the output copy
  return e.take();
}

}  // namespace corun::detail
