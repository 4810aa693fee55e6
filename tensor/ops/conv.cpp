// 2-D convolution as im2col + GEMM. For one image and one group, im2col lays every window the
// kernel visits out as a column:
//
//   cols (K, Ho Wo),  K = Cg kH kW:   cols[(c, a, b), (i, j)] = x[c, i sh - pt + a dh, j sw - pl + b dw]
//
// (zero where that falls in the padding), and the convolution is one matrix product,
//
//   y_g (Og, Ho Wo) = W_g (Og, K) @ cols (K, Ho Wo)   [+ bias, written first: BLAS beta = 1].
//
// The backward is two more products through the same matrix: dcols = W_g^T dy_g, scattered back
// onto the image by col2im (the transpose of im2col: every window adds its column in), and
// dW_g = sum_n dy_g cols^T.
//
// Blocks: one image's product is small when the image is (8x8: Ho Wo = 64 columns), and BLAS is
// slower on small products. So images go in blocks of nb (chosen from the shapes alone, about 256
// columns per block): cols (K, nb Ho Wo) holds the windows of nb images side by side, and one
// product serves them all; y and dy are copied between (nb, Og, Ho Wo) and (Og, nb Ho Wo). Not
// more: a block's columns should stay in the core's cache between im2col and the product
// (measured on digits_cnn: 256 columns 0.555 ms forward+backward, 512 0.577, 64 0.58).
//
// Threads: blocks of images are independent, so the forward splits them across threads. The
// backward goes over fixed chunks of blocks (a function of the shapes only): dx is written per
// image, while dW and db, which sum over images, are summed per chunk into buffers of their own
// and the chunks added in order, so the bits do not depend on the thread count.
#include "minigrad/tensor/ops/conv.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "minigrad/tensor/blas.h"
#include "minigrad/tensor/fastmath.h"
#include "minigrad/tensor/parallel.h"
#include "minigrad/tensor/scratch.h"

namespace mg {
namespace {

constexpr int64_t kBlockColumns = 256;  // aim for this many columns (output pixels) per product
// The backward splits the blocks into at most this many chunks (each one thread's work, with dW and
// db partials of its own): enough for the threads, and partials that stay small (kMaxChunks O K).
constexpr int64_t kMaxChunks = 16;
// float32 products go to oneDNN: on digits_cnn's products (forward 32 x 256 x 144) it runs at 160-210
// GFLOP/s on one core against OpenBLAS's 83-100 with its Haswell kernel (tensor/blas.h)
constexpr blas::Engine kEngine = blas::Engine::OneDNN;

struct Geometry {
  int64_t N, C, H, W, O, Cg, Og, kh, kw, Ho, Wo, K, HoWo;
  int64_t Hp, Wp;   // the padded image's height and width
  int64_t nb;       // images per block (a function of the shapes only)
  bool direct;      // one image per block, 1x1 kernel, stride 1, no padding: cols is the image itself
  bool pads;        // some padding is nonzero
  bool via_padded;  // im2col/col2im go through a zero-padded copy of the image (see im2col)
};

Geometry check_conv(const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dArgs& a, std::string_view op) {
  MG_CHECK(x.defined() && w.defined(), StateError, "{}: an operand is undefined", op);
  MG_CHECK(x.dim() == 4, ShapeError, "{}: expected input (N, C, H, W), got shape {}", op, shape_str(x.shape()));
  MG_CHECK(w.dim() == 4, ShapeError, "{}: expected weight (out_channels, in_channels / groups, kH, kW), got shape {}",
           op, shape_str(w.shape()));
  MG_CHECK(is_floating(x.dtype()) && x.dtype() == w.dtype() && (!bias.defined() || bias.dtype() == x.dtype()),
           DTypeError, "{}: input {}, weight {}{} must be one floating dtype", op, dtype_name(x.dtype()),
           dtype_name(w.dtype()), bias.defined() ? fmt::format(" and bias {}", dtype_name(bias.dtype())) : "");
  MG_CHECK(a.groups >= 1, ValueError, "{}: groups must be >= 1, got {}", op, a.groups);
  MG_CHECK(a.stride_h >= 1 && a.stride_w >= 1, ValueError, "{}: stride must be >= 1, got ({}, {})", op, a.stride_h,
           a.stride_w);
  MG_CHECK(a.dilation_h >= 1 && a.dilation_w >= 1, ValueError, "{}: dilation must be >= 1, got ({}, {})", op,
           a.dilation_h, a.dilation_w);
  MG_CHECK(a.pad_top >= 0 && a.pad_bottom >= 0 && a.pad_left >= 0 && a.pad_right >= 0, ValueError,
           "{}: padding must be >= 0, got top {}, bottom {}, left {}, right {}", op, a.pad_top, a.pad_bottom,
           a.pad_left, a.pad_right);
  Geometry g{};
  g.N = x.size(0), g.C = x.size(1), g.H = x.size(2), g.W = x.size(3);
  g.O = w.size(0), g.Cg = w.size(1), g.kh = w.size(2), g.kw = w.size(3);
  MG_CHECK(g.O % a.groups == 0, ValueError, "{}: out_channels {} is not divisible by groups {}", op, g.O, a.groups);
  MG_CHECK(g.C == checked_mul(g.Cg, a.groups, op), ShapeError,
           "{}: input has {} channels but weight {} with groups={} expects {}", op, g.C, shape_str(w.shape()), a.groups,
           g.Cg * a.groups);
  MG_CHECK(g.kh >= 1 && g.kw >= 1, ShapeError, "{}: the kernel size must be >= 1, got weight {}", op,
           shape_str(w.shape()));
  MG_CHECK(!bias.defined() || bias.shape() == Shape{g.O}, ShapeError, "{}: bias has shape {} but weight {} needs ({},)",
           op, shape_str(bias.shape()), shape_str(w.shape()), g.O);
  g.Og = g.O / a.groups;
  g.Ho = conv_output_size(g.H, g.kh, a.stride_h, a.pad_top, a.pad_bottom, a.dilation_h, op);
  g.Wo = conv_output_size(g.W, g.kw, a.stride_w, a.pad_left, a.pad_right, a.dilation_w, op);
  g.K = checked_mul(checked_mul(g.Cg, g.kh, op), g.kw, op);
  g.HoWo = checked_mul(g.Ho, g.Wo, op);
  checked_mul(g.K, g.HoWo, op);  // the im2col buffer's size
  g.nb = std::clamp<int64_t>(kBlockColumns / std::max<int64_t>(g.HoWo, 1), 1, std::max<int64_t>(g.N, 1));
  g.pads = a.pad_top > 0 || a.pad_bottom > 0 || a.pad_left > 0 || a.pad_right > 0;
  g.direct = g.nb == 1 && g.kh == 1 && g.kw == 1 && a.stride_h == 1 && a.stride_w == 1 && !g.pads;
  g.Hp = g.H + a.pad_top + a.pad_bottom, g.Wp = g.W + a.pad_left + a.pad_right;  // checked by conv_output_size
  const int64_t padded_image = checked_mul(checked_mul(g.Cg, g.Hp, op), g.Wp, op);
  g.via_padded = padded_image <= g.K * g.HoWo;  // not when huge padding meets large strides
  return g;
}

// Output columns j whose input column j sw - pl + q dw falls inside [0, W): [lo, hi).
inline std::pair<int64_t, int64_t> valid_columns(const Geometry& g, const Conv2dArgs& a, int64_t q) {
  const int64_t off = q * a.dilation_w - a.pad_left;                               // input column of output column 0
  const int64_t lo = off >= 0 ? 0 : -off / a.stride_w + (-off % a.stride_w != 0);  // ceil(-off / sw), without overflow
  const int64_t hi = off >= g.W ? 0 : std::min(g.Wo, (g.W - 1 - off) / a.stride_w + 1);
  return {std::min(lo, g.Wo), std::max(hi, std::min(lo, g.Wo))};
}

// out[0, n) = in[0, n), and out[0, n) += in[0, n), in steps of 8 that the compiler turns into one
// vector instruction each: the rows here are short (8 for an 8x8 image), too short for the loops it
// vectorises by itself, which would run them one element at a time.
template <class T>
inline void copy_row(const T* __restrict in, T* __restrict out, int64_t n) {
  int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    for (int l = 0; l < 8; ++l) out[j + l] = in[j + l];
  for (; j < n; ++j) out[j] = in[j];
}
template <class T>
inline void add_row(const T* __restrict in, T* __restrict out, int64_t n) {
  int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    for (int l = 0; l < 8; ++l) out[j + l] += in[j + l];
  for (; j < n; ++j) out[j] += in[j];
}

// cols (K, Ho Wo) of image `img` (Cg, H, W), one group's channels; row r of cols starts at cols + r ld.
//
// Usually (g.via_padded) the image is first copied into `pad`, a zero-padded (Cg, Hp, Wp) buffer
// (or used as it is when there is no padding). Every window then lies inside it, and a row of
// cols is plain strided reads with no bounds check:
//   cols[(c, p, q), (i, j)] = xp[c, i sh + p dh, j sw + q dw]
// Otherwise (a padded image bigger than its columns: huge padding with large strides) each read is
// checked against the image and the padding written as zeros.
template <class T>
void im2col(const T* img, const Geometry& g, const Conv2dArgs& a, T* cols, int64_t ld, T* pad) {
  if (g.via_padded) {
    const T* xp = img;
    if (g.pads) {
      std::fill_n(pad, g.Cg * g.Hp * g.Wp, T(0));
      for (int64_t c = 0; c < g.Cg; ++c)
        for (int64_t h = 0; h < g.H; ++h)
          std::copy_n(img + (c * g.H + h) * g.W, g.W, pad + (c * g.Hp + h + a.pad_top) * g.Wp + a.pad_left);
      xp = pad;
    }
    const int64_t in_step =
        g.Ho > 1 ? a.stride_h * g.Wp : 0;  // from one output row's input to the next's (< Hp Wp when used)
    for (int64_t c = 0; c < g.Cg; ++c)
      for (int64_t p = 0; p < g.kh; ++p)
        for (int64_t q = 0; q < g.kw; ++q) {
          T* out = cols + ((c * g.kh + p) * g.kw + q) * ld;                            // row (c, p, q), output row 0
          const T* in = xp + (c * g.Hp + p * a.dilation_h) * g.Wp + q * a.dilation_w;  // its input
          for (int64_t i = 0; i < g.Ho; ++i, out += g.Wo, in += in_step) {
            if (a.stride_w == 1)
              copy_row(in, out, g.Wo);
            else
              for (int64_t j = 0; j < g.Wo; ++j) out[j] = in[j * a.stride_w];
          }
        }
    return;
  }
  for (int64_t c = 0; c < g.Cg; ++c)
    for (int64_t p = 0; p < g.kh; ++p)
      for (int64_t q = 0; q < g.kw; ++q) {
        T* row = cols + ((c * g.kh + p) * g.kw + q) * ld;
        const auto [lo, hi] = valid_columns(g, a, q);
        const int64_t off = q * a.dilation_w - a.pad_left, dh = p * a.dilation_h - a.pad_top;  // h = i stride_h + dh
        for (int64_t i = 0; i < g.Ho; ++i) {
          T* out = row + i * g.Wo;
          const int64_t h = i * a.stride_h + dh;
          if (h < 0 || h >= g.H) {
            for (int64_t j = 0; j < g.Wo; ++j) out[j] = T(0);
            continue;
          }
          const T* in = img + (c * g.H + h) * g.W;  // in[j stride_w + off] is output column j's input
          for (int64_t j = 0; j < lo; ++j) out[j] = T(0);
          for (int64_t j = lo; j < hi; ++j) out[j] = in[j * a.stride_w + off];
          for (int64_t j = hi; j < g.Wo; ++j) out[j] = T(0);
        }
      }
}

// img (Cg, H, W) = the columns of dcols (K, Ho Wo) put back where im2col took them from (every
// window adds its column in); row r of dcols starts at dcols + r ld. With g.via_padded and padding
// the sums are made in the zero-padded buffer `pad` (Cg, Hp, Wp), whose inside is then img.
template <class T>
void col2im(const T* dcols, const Geometry& g, const Conv2dArgs& a, T* img, int64_t ld, T* pad) {
  T* xp = g.via_padded && g.pads ? pad : img;  // where the sums are made
  std::fill_n(xp, g.via_padded && g.pads ? g.Cg * g.Hp * g.Wp : g.Cg * g.H * g.W, T(0));
  if (g.via_padded) {
    const int64_t in_step = g.Ho > 1 ? a.stride_h * g.Wp : 0;  // a single output row never steps
    for (int64_t c = 0; c < g.Cg; ++c)
      for (int64_t p = 0; p < g.kh; ++p)
        for (int64_t q = 0; q < g.kw; ++q) {
          const T* from = dcols + ((c * g.kh + p) * g.kw + q) * ld;
          T* to = xp + (c * g.Hp + p * a.dilation_h) * g.Wp + q * a.dilation_w;
          for (int64_t i = 0; i < g.Ho; ++i, from += g.Wo, to += in_step) {
            if (a.stride_w == 1)
              add_row(from, to, g.Wo);
            else
              for (int64_t j = 0; j < g.Wo; ++j) to[j * a.stride_w] += from[j];
          }
        }
    if (g.pads)
      for (int64_t c = 0; c < g.Cg; ++c)
        for (int64_t h = 0; h < g.H; ++h) {
          const T* from = pad + (c * g.Hp + h + a.pad_top) * g.Wp + a.pad_left;
          copy_row(from, img + (c * g.H + h) * g.W, g.W);
        }
    return;
  }
  for (int64_t c = 0; c < g.Cg; ++c)
    for (int64_t p = 0; p < g.kh; ++p)
      for (int64_t q = 0; q < g.kw; ++q) {
        const T* row = dcols + ((c * g.kh + p) * g.kw + q) * ld;
        const auto [lo, hi] = valid_columns(g, a, q);
        const int64_t off = q * a.dilation_w - a.pad_left, dh = p * a.dilation_h - a.pad_top;
        for (int64_t i = 0; i < g.Ho; ++i) {
          const int64_t h = i * a.stride_h + dh;
          if (h < 0 || h >= g.H) continue;
          T* dst = img + (c * g.H + h) * g.W;
          const T* src = row + i * g.Wo;
          for (int64_t j = lo; j < hi; ++j) dst[j * a.stride_w + off] += src[j];
        }
      }
}

// The multiply-adds of `blocks` blocks' products, for the threads' grain (saturating: only a hint).
int64_t block_work(const Geometry& g, int64_t blocks) {
  const double w = static_cast<double>(blocks) * g.nb * g.O * std::max<int64_t>(g.K, 1) * g.HoWo;
  return w >= 9e18 ? std::numeric_limits<int64_t>::max() : std::max<int64_t>(1, static_cast<int64_t>(w));
}

// The size of im2col's and col2im's padded buffer (0 when they need none).
int64_t pad_size(const Geometry& g) { return g.via_padded && g.pads ? g.Cg * g.Hp * g.Wp : 0; }

// cols (K, nb Ho Wo) of images n0 .. n0 + nb - 1 of x (N, C, H, W), group grp: image i's windows
// are columns [i Ho Wo, (i + 1) Ho Wo).
template <class T>
void im2col_block(const T* x, const Geometry& g, const Conv2dArgs& a, int64_t n0, int64_t nb, int64_t grp, T* cols,
                  T* pad) {
  for (int64_t i = 0; i < nb; ++i)
    im2col(x + ((n0 + i) * g.C + grp * g.Cg) * g.H * g.W, g, a, cols + i * g.HoWo, nb * g.HoWo, pad);
}

}  // namespace

int64_t conv_output_size(int64_t in, int64_t kernel, int64_t stride, int64_t pad_before, int64_t pad_after,
                         int64_t dilation, std::string_view op) {
  const int64_t padded = checked_add(checked_add(in, pad_before, op), pad_after, op);
  const int64_t window = checked_add(checked_mul(dilation, kernel - 1, op), 1, op);
  MG_CHECK(padded >= window, ShapeError,
           "{}: the window ({} with dilation {}: {} wide) is larger than the padded input ({} + {} + {} = {})", op,
           kernel, dilation, window, in, pad_before, pad_after, padded);
  return (padded - window) / stride + 1;
}

// y[n, g Og + o, :] = W_g[o] @ cols(x[n], g) + bias        x (N, C, H, W)   W (O, Cg, kH, kW)   y (N, O, Ho, Wo)
Tensor conv2d(const Tensor& x0, const Tensor& w0, const Tensor& bias, const Conv2dArgs& a) {
  const Geometry g = check_conv(x0, w0, bias, a, "conv2d");
  const Tensor x = x0.contiguous(), w = w0.contiguous(), b = bias.defined() ? bias.contiguous() : Tensor();
  Tensor y = empty({g.N, g.O, g.Ho, g.Wo}, x.dtype());
  visit_float(x.dtype(), "conv2d", [&]<class T>() {
    const T *px = x.data<T>(), *pw = w.data<T>(), *pb = b.defined() ? b.data<T>() : nullptr;
    T* py = y.data<T>();
    const int64_t blocks = (g.N + g.nb - 1) / g.nb, work = block_work(g, 1);
    const bool any_gemm = g.K > 0 && g.Og > 0;
    parallel_for(0, blocks, grain_for(work), [&](int64_t b0, int64_t b1) {
      // scratch, written before it is read (none when there is no product to feed)
      Scratch<T> cols(g.direct || !any_gemm ? 0 : g.K * g.nb * g.HoWo);
      Scratch<T> prod(g.nb == 1 ? 0 : g.Og * g.nb * g.HoWo);
      Scratch<T> pad(g.direct || !any_gemm ? 0 : pad_size(g));
      for (int64_t blk = b0; blk < b1; ++blk) {
        const int64_t n0 = blk * g.nb, nb = std::min(g.nb, g.N - n0), cols_n = nb * g.HoWo;
        for (int64_t grp = 0; grp < a.groups; ++grp) {
          const T* wg = pw + grp * g.Og * g.K;
          const bool gemm = g.K > 0 && g.Og > 0;
          if (gemm && !g.direct) im2col_block(px, g, a, n0, nb, grp, cols.get(), pad.get());
          const T* B = g.direct ? px + (n0 * g.C + grp * g.Cg) * g.H * g.W : cols.get();  // (K, nb Ho Wo)
          if (nb == 1) {  // one image: y_g = bias, then += W_g @ cols straight into y (BLAS beta = 1)
            T* out = py + (n0 * g.O + grp * g.Og) * g.HoWo;
            for (int64_t o = 0; o < g.Og; ++o)
              std::fill(out + o * g.HoWo, out + (o + 1) * g.HoWo, pb ? pb[grp * g.Og + o] : T(0));
            if (gemm) blas::gemm(false, false, g.Og, g.HoWo, g.K, T(1), wg, g.K, B, g.HoWo, T(1), out, g.HoWo, kEngine);
            continue;
          }
          // prod (Og, nb Ho Wo) = W_g (Og, K) @ cols (K, nb Ho Wo); y[n0 + i, group] = prod[:, image i] + bias
          if (gemm)
            blas::gemm(false, false, g.Og, cols_n, g.K, T(1), wg, g.K, B, cols_n, T(0), prod.get(), cols_n, kEngine);
          else
            std::fill_n(prod.get(), g.Og * cols_n, T(0));
          for (int64_t i = 0; i < nb; ++i)
            for (int64_t o = 0; o < g.Og; ++o) {
              const T* src = prod.get() + o * cols_n + i * g.HoWo;
              T* dst = py + ((n0 + i) * g.O + grp * g.Og + o) * g.HoWo;
              const T bo = pb ? pb[grp * g.Og + o] : T(0);
              for (int64_t j = 0; j < g.HoWo; ++j) dst[j] = src[j] + bo;
            }
        }
      }
    });
  });
  return y;
}

// With a block of nb images side by side (dprod (Og, nb Ho Wo) gathered from dy, cols as in the forward):
// dcols_g = W_g^T (K, Og) @ dprod_g (Og, nb Ho Wo);  dx[n, group g] = col2im(dcols_g[:, image n])
// dW_g += dprod_g (Og, nb Ho Wo) @ cols_g^T (nb Ho Wo, K), summed over blocks in fixed chunks
// db[o] = sum_{n, i, j} dy[n, o, i, j], summed the same way
// One pass over the blocks does all three, so each block's dy is gathered once.
Conv2dGrads conv2d_backward(const Tensor& dy0, const Tensor& x0, const Tensor& w0, const Conv2dArgs& a, bool need_dx,
                            bool need_dweight, bool need_dbias) {
  const Geometry g = check_conv(x0, w0, Tensor(), a, "conv2d_backward");
  MG_CHECK(dy0.defined(), StateError, "conv2d_backward: dy is undefined");
  MG_CHECK(dy0.shape() == (Shape{g.N, g.O, g.Ho, g.Wo}), ShapeError,
           "conv2d_backward: dy has shape {} but the output is {}", shape_str(dy0.shape()),
           shape_str(Shape{g.N, g.O, g.Ho, g.Wo}));
  MG_CHECK(dy0.dtype() == x0.dtype(), DTypeError, "conv2d_backward: dy is {} and x {}", dtype_name(dy0.dtype()),
           dtype_name(x0.dtype()));
  // x is read only for dweight: for dx alone it gives the input's shape (conv_transpose2d passes
  // a stride-0 view that holds no image)
  const Tensor dy = dy0.contiguous(), x = need_dweight ? x0.contiguous() : x0, w = w0.contiguous();
  Conv2dGrads out;
  // every image of dx is written whole by the product or by col2im; zeros when there is no product
  const bool dx_written = g.K > 0 && g.Og > 0;
  if (need_dx) out.dx = dx_written ? empty({g.N, g.C, g.H, g.W}, x.dtype()) : zeros({g.N, g.C, g.H, g.W}, x.dtype());
  if (need_dweight) out.dweight = zeros(w.shape(), x.dtype());
  if (need_dbias) out.dbias = zeros({g.O}, x.dtype());
  if (!need_dx && !need_dweight && !need_dbias) return out;
  visit_float(x.dtype(), "conv2d_backward", [&]<class T>() {
    const T *px = need_dweight ? x.data<T>() : nullptr, *pw = w.data<T>(), *pdy = dy.data<T>();
    T* pdx = need_dx ? out.dx.data<T>() : nullptr;
    const bool gemms = g.K > 0 && g.Og > 0, dx_gemm = need_dx && gemms, dw_gemm = need_dweight && gemms;
    const int64_t blocks = (g.N + g.nb - 1) / g.nb;
    // dW and db sum over images: chunk c (per_chunk blocks, a function of the shapes only) sums into
    // its own partial, and the partials are added in chunk order, so the bits do not depend on threads.
    const int64_t per_chunk = (blocks + kMaxChunks - 1) / kMaxChunks,
                  chunks = per_chunk == 0 ? 0 : (blocks + per_chunk - 1) / per_chunk;
    const int64_t wsize = g.O * g.K;
    std::vector<T> dw_part(dw_gemm ? checked_mul(chunks, wsize, "conv2d_backward") : 0);
    std::vector<double> db_part(need_dbias ? checked_mul(chunks, g.O, "conv2d_backward") : 0, 0.0);
    const int64_t work = block_work(g, per_chunk);
    parallel_for(0, chunks, grain_for(work), [&](int64_t c0, int64_t c1) {
      // scratch, written before it is read: dprod (gathered dy), cols (im2col of x), dcols (W^T dprod), pad
      const int64_t block_cols = g.nb * g.HoWo;
      Scratch<T> dprod(g.nb == 1 ? 0 : g.Og * block_cols);
      Scratch<T> cols(dw_gemm && !g.direct ? g.K * block_cols : 0);
      Scratch<T> dcols(dx_gemm && !g.direct ? g.K * block_cols : 0);
      Scratch<T> pad(g.direct || !gemms ? 0 : pad_size(g));
      for (int64_t c = c0; c < c1; ++c) {
        const int64_t blk0 = c * per_chunk, blk1 = std::min(blocks, (c + 1) * per_chunk);
        for (int64_t blk = blk0; blk < blk1; ++blk) {
          const int64_t n0 = blk * g.nb, nb = std::min(g.nb, g.N - n0), cols_n = nb * g.HoWo;
          for (int64_t grp = 0; grp < a.groups; ++grp) {
            // dprod (Og, nb Ho Wo): dy's rows of this block and group side by side (dy itself for one image)
            const T* dp = pdy + (n0 * g.O + grp * g.Og) * g.HoWo;
            if (nb > 1) {
              for (int64_t o = 0; o < g.Og; ++o)
                for (int64_t i = 0; i < nb; ++i)
                  std::copy_n(pdy + ((n0 + i) * g.O + grp * g.Og + o) * g.HoWo, g.HoWo,
                              dprod.get() + o * cols_n + i * g.HoWo);
              dp = dprod.get();
            }
            if (need_dbias)
              for (int64_t o = 0; o < g.Og; ++o)
                db_part[c * g.O + grp * g.Og + o] += fast::sum8_in_double(dp + o * cols_n, cols_n);
            if (dx_gemm) {
              T* img = pdx + (n0 * g.C + grp * g.Cg) * g.H * g.W;
              blas::gemm(true, false, g.K, cols_n, g.Og, T(1), pw + grp * g.Og * g.K, g.K, dp, cols_n, T(0),
                         g.direct ? img : dcols.get(), cols_n, kEngine);
              if (!g.direct)
                for (int64_t i = 0; i < nb; ++i)
                  col2im(dcols.get() + i * g.HoWo, g, a, pdx + ((n0 + i) * g.C + grp * g.Cg) * g.H * g.W, cols_n,
                         pad.get());
            }
            if (dw_gemm) {
              if (!g.direct) im2col_block(px, g, a, n0, nb, grp, cols.get(), pad.get());
              const T* B = g.direct ? px + (n0 * g.C + grp * g.Cg) * g.H * g.W : cols.get();
              blas::gemm(false, true, g.Og, g.K, cols_n, T(1), dp, cols_n, B, cols_n, blk == blk0 ? T(0) : T(1),
                         dw_part.data() + c * wsize + grp * g.Og * g.K, g.K, kEngine);
            }
          }
        }
      }
    });
    if (dw_gemm) {
      T* pdw = out.dweight.data<T>();
      for (int64_t c = 0; c < chunks; ++c)
        for (int64_t i = 0; i < wsize; ++i) pdw[i] += dw_part[c * wsize + i];
    }
    if (need_dbias) {
      T* pdb = out.dbias.data<T>();
      for (int64_t o = 0; o < g.O; ++o) {
        double s = 0;
        for (int64_t c = 0; c < chunks; ++c) s += db_part[c * g.O + o];
        pdb[o] = static_cast<T>(s);
      }
    }
  });
  return out;
}

}  // namespace mg
