// optim_reference.h — an independent fp64 model of bitsandbytes' optimizers, written from the
// formulas of the behavioural specification (docs/behaviour.md §8.3/§8.4), not from the backend's code;
// and the realistic problem the optimizer tests train: a least-squares regression.
#pragma once

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "optim8_cases.h"

namespace kbit_test {

inline std::vector<double> as_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// v rounded to the element type `dtype` (fp32 / fp16 / bf16), as floats.
inline std::vector<float> rounded(const std::vector<double>& v, int32_t dtype) {
    std::vector<float> out(v.size());
    for (size_t i = 0; i < v.size(); ++i) out[i] = round_dtype(static_cast<float>(v[i]), dtype);
    return out;
}

// Initial parameters of an optimizer test: n normal values (stddev 0.1, deterministic for the seed) as
// the element type `dtype` holds them.
inline std::vector<float> initial_params(size_t n, uint32_t seed, int32_t dtype) {
    return rounded(as_double(normal_floats(n, seed, 0.1f)), dtype);
}

// One optimizer's parameters and states in double precision.
class RefOptimizer {
public:
    RefOptimizer(Kind kind, const std::vector<float>& p0)
        : kind_(kind), p(p0.begin(), p0.end()), s1(p0.size()), s2(p0.size()), s3(p0.size()) {}

    // Sum of the per-element update-norm terms (before the step; Lion: after it).
    double norm_sum(const std::vector<double>& g, const Hyper& h) const {
        const int t = h.step;
        double sum = 0.0;
        for (size_t i = 0; i < p.size(); ++i) {
            const double gi = g[i] * h.gnorm_scale;
            double x = 0.0;
            switch (kind_) {
                case Kind::Adam: {
                    const double m = h.beta1 * s1[i] + (1.0 - h.beta1) * gi;
                    const double v = h.beta2 * s2[i] + (1.0 - h.beta2) * gi * gi;
                    x = (m / (1.0 - std::pow(h.beta1, t))) / (std::sqrt(v / (1.0 - std::pow(h.beta2, t))) + h.eps);
                    sum += x * x;
                    break;
                }
                case Kind::Momentum:
                    x = t == 1 ? gi : h.beta1 * s1[i] + gi;
                    sum += x * x;
                    break;
                case Kind::RMSprop:
                    x = gi / (std::sqrt(h.beta1 * s1[i] + (1.0 - h.beta1) * gi * gi) + h.eps);
                    sum += x * x;
                    break;
                case Kind::Adagrad:
                    x = gi / (std::sqrt(s1[i] + gi * gi) + h.eps);
                    sum += x * x;
                    break;
                case Kind::Lion: sum += h.beta2 * s1[i] + (1.0 - h.beta2) * gi; break;
                default: break;
            }
        }
        return sum;
    }

    static double clip(double sum, double max_unorm, double param_norm, double eps, bool one_state) {
        if (!(max_unorm > 0.0)) return 1.0;
        const double norm = std::sqrt(sum);
        const double lim = max_unorm * param_norm + (one_state ? eps : 0.0);
        return norm > lim ? lim / norm : 1.0;
    }

    // One step with gradient g; u is the update-norm clip factor.
    void step(const std::vector<double>& g, const Hyper& h, double u = 1.0) {
        const int t = h.step;
        const double c1 = 1.0 - std::pow(h.beta1, t), c2 = std::sqrt(1.0 - std::pow(h.beta2, t));
        const double lr = h.lr, wd = h.weight_decay;
        for (size_t i = 0; i < p.size(); ++i) {
            double gi = g[i] * h.gnorm_scale;
            const bool coupled = kind_ == Kind::Momentum || kind_ == Kind::RMSprop || kind_ == Kind::Adagrad;
            if (coupled && wd > 0.0) gi += p[i] * wd;
            if (h.skip_zeros && gi == 0.0 && kind_ != Kind::AdEMAMix) continue;
            switch (kind_) {
                case Kind::Adam:
                    s1[i] = h.beta1 * s1[i] + (1.0 - h.beta1) * gi;
                    s2[i] = h.beta2 * s2[i] + (1.0 - h.beta2) * gi * gi;
                    p[i] += u * (-lr * c2 / c1) * s1[i] / (std::sqrt(s2[i]) + h.eps * c2);
                    if (wd > 0.0) p[i] *= 1.0 - lr * wd;
                    break;
                case Kind::AdEMAMix:
                    s1[i] = h.beta1 * s1[i] + (1.0 - h.beta1) * gi;
                    s3[i] = h.beta3 * s3[i] + (1.0 - h.beta3) * gi;
                    s2[i] = h.beta2 * s2[i] + (1.0 - h.beta2) * gi * gi;
                    p[i] -= lr * (s1[i] / c1 + h.alpha * s3[i]) / (std::sqrt(s2[i]) / c2 + h.eps);
                    if (wd > 0.0) p[i] *= 1.0 - lr * wd;
                    break;
                case Kind::Momentum:
                    s1[i] = t == 1 ? gi : h.beta1 * s1[i] + gi;
                    p[i] -= u * lr * s1[i];
                    break;
                case Kind::RMSprop:
                    s1[i] = h.beta1 * s1[i] + (1.0 - h.beta1) * gi * gi;
                    p[i] -= u * lr * gi / (std::sqrt(s1[i]) + h.eps);
                    break;
                case Kind::Adagrad:
                    s1[i] += gi * gi;
                    p[i] -= lr * gi / (std::sqrt(s1[i]) + h.eps);
                    break;
                case Kind::Lion: {
                    if (wd > 0.0) p[i] *= 1.0 - lr * wd;
                    const double d = h.beta1 * s1[i] + (1.0 - h.beta1) * gi;
                    p[i] -= u * lr * static_cast<double>((d > 0) - (d < 0));
                    s1[i] = h.beta2 * s1[i] + (1.0 - h.beta2) * gi;
                    break;
                }
            }
        }
    }

    Kind kind_;
    std::vector<double> p, s1, s2, s3;  // s2: v / nu; s3: AdEMAMix m2
};

// One element of an 8-bit blockwise step on dequantized states, in double (docs/behaviour.md §8.5, §8.6): the
// same formulas as the 32-bit step except that the gradient is not rounded to the parameter type,
// a non-finite gradient zeroes Adam's / AdEMAMix's states and skips p, RMSprop and Adagrad step p
// with the stored gradient, and Lion's step is lr * sgn rounded to the parameter type. Returns whether
// p changed.
inline bool ref8_element(Kind kind, const Hyper& h, int32_t dtype, double g, double& p, double& s1, double& s2,
                         double& s3) {
    const int t = h.step;
    const double c1 = 1.0 - std::pow(h.beta1, t), c2 = std::sqrt(1.0 - std::pow(h.beta2, t));
    const double lr = h.lr, wd = h.weight_decay;
    if (kind == Kind::Adam || kind == Kind::AdEMAMix) {
        if (!std::isfinite(g)) {
            s1 = s2 = s3 = 0.0;
            return false;
        }
        const double gs = g * h.gnorm_scale;
        s2 = h.beta2 * s2 + (1.0 - h.beta2) * gs * gs;
        s1 = h.beta1 * s1 + (1.0 - h.beta1) * gs;
        if (kind == Kind::Adam) {
            p += (-lr * c2 / c1) * s1 / (std::sqrt(s2) + c2 * h.eps);
        } else {
            s3 = h.beta3 * s3 + (1.0 - h.beta3) * gs;
            p -= lr * (s1 / c1 + h.alpha * s3) / (std::sqrt(s2) / c2 + h.eps);
        }
        if (wd > 0.0) p *= 1.0 - lr * wd;
        return true;
    }
    if (h.skip_zeros && g == 0.0) return false;
    double gs = g * h.gnorm_scale;
    if (wd > 0.0) {
        if (kind == Kind::Lion) p *= 1.0 - lr * wd;
        // The spec forms the coupled gradient in fp32; RMSprop and Adagrad then divide the raw
        // gradient by the root of its square, which amplifies that rounding where g ~ -p*wd.
        else gs = static_cast<float>(static_cast<float>(gs) + static_cast<float>(p) * static_cast<float>(wd));
    }
    switch (kind) {
        case Kind::Momentum:
            s1 = t == 1 ? gs : h.beta1 * s1 + gs;
            p -= lr * s1;
            return true;
        case Kind::RMSprop:
            s1 = h.beta1 * s1 + (1.0 - h.beta1) * gs * gs;
            p -= lr * g / (std::sqrt(s1) + h.eps);
            return true;
        case Kind::Adagrad:
            s1 += gs * gs;
            p -= lr * g / (std::sqrt(s1) + h.eps);
            return true;
        default: {  // Lion
            const double dir = h.beta1 * s1 + (1.0 - h.beta1) * gs;
            const double d = round_dtype(static_cast<float>(lr * static_cast<double>((dir > 0) - (dir < 0))), dtype);
            s1 = h.beta2 * s1 + (1.0 - h.beta2) * gs;
            if (h.skip_zeros && d == 0.0) return wd > 0.0;
            p -= d;
            return true;
        }
    }
}

// The distance from y to the farthest end of the code interval that holds it: a bound on
// |code[c] - y| for the nearest code and for its sign-fixed neighbour (beyond the table's ends,
// the distance to the end).
inline double code_interval(const std::vector<float>& code, double y) {
    if (y <= code[0]) return code[0] - y;
    if (y >= code[255]) return y - code[255];
    const size_t j = static_cast<size_t>(std::upper_bound(code.begin(), code.end(), y) - code.begin()) - 1;
    return static_cast<double>(code[std::min<size_t>(j + 1, 255)]) - code[j];  // code[j] <= y <= code[j+1]
}

// A least-squares regression W x -> y (W: rows x cols) with a fixed batch, targets from a teacher
// matrix plus noise; loss = scale / (2B) * sum ||W x_b - y_b||^2.
class LeastSquares {
public:
    LeastSquares(int rows, int cols, int batch, uint32_t seed, double scale = 0.05)
        : rows_(rows), cols_(cols), batch_(batch), scale_(scale) {
        const auto x = normal_floats(static_cast<size_t>(batch) * cols, seed, 1.0f);
        const auto teacher = normal_floats(static_cast<size_t>(rows) * cols, seed + 1, 0.1f);
        const auto noise = normal_floats(static_cast<size_t>(batch) * rows, seed + 2, 0.01f);
        x_.assign(x.begin(), x.end());
        y_.resize(static_cast<size_t>(batch) * rows);
        for (int b = 0; b < batch; ++b)
            for (int r = 0; r < rows; ++r) {
                double acc = noise[static_cast<size_t>(b) * rows + r];
                for (int c = 0; c < cols; ++c) acc += teacher[static_cast<size_t>(r) * cols + c] * x_[static_cast<size_t>(b) * cols + c];
                y_[static_cast<size_t>(b) * rows + r] = acc;
            }
    }
    size_t size() const { return static_cast<size_t>(rows_) * cols_; }

    // Loss and gradient at w.
    double loss(const std::vector<float>& w, std::vector<double>* grad = nullptr) const {
        if (grad) grad->assign(size(), 0.0);
        double loss = 0.0;
        std::vector<double> res(rows_);
        for (int b = 0; b < batch_; ++b) {
            const double* xb = &x_[static_cast<size_t>(b) * cols_];
            for (int r = 0; r < rows_; ++r) {
                double acc = -y_[static_cast<size_t>(b) * rows_ + r];
                for (int c = 0; c < cols_; ++c) acc += w[static_cast<size_t>(r) * cols_ + c] * xb[c];
                res[r] = acc;
                loss += acc * acc;
            }
            if (grad)
                for (int r = 0; r < rows_; ++r)
                    for (int c = 0; c < cols_; ++c)
                        (*grad)[static_cast<size_t>(r) * cols_ + c] += scale_ / batch_ * res[r] * xb[c];
        }
        return scale_ / (2.0 * batch_) * loss;
    }

private:
    int rows_, cols_, batch_;
    double scale_;
    std::vector<double> x_, y_;
};

// Elements with |got - want| > atol + rtol * |want| (NaN counts).
inline long count_not_close(const std::vector<float>& got, const std::vector<double>& want, double atol, double rtol,
                            long* first = nullptr) {
    long bad = 0;
    for (size_t i = 0; i < got.size(); ++i) {
        const double d = std::fabs(static_cast<double>(got[i]) - want[i]);
        if (!(d <= atol + rtol * std::fabs(want[i]))) {
            if (bad == 0 && first) *first = static_cast<long>(i);
            ++bad;
        }
    }
    return bad;
}

// bitsandbytes' tolerances for 32-bit optimizers against their reference (test_optimizer32bit).
struct Tolerance {
    double atol, rtol;
};
inline Tolerance tolerance32(int32_t dtype) {
    return dtype == KBIT_DTYPE_FP32 ? Tolerance{1e-6, 1e-5} : dtype == KBIT_DTYPE_BF16 ? Tolerance{1e-3, 1e-2} : Tolerance{1e-4, 1e-3};
}

// The training runs of the optimizer tests, none where the backend has no optimizers: for every
// function f of `fns` and weight decay wd 0 and 0.01, under INFO naming both, run(k, wd, p0, tol) with
// initial parameters p0 for `problem` from `seed`, the Kernel k(f, p0) that holds f's buffers, and
// bitsandbytes' 32-bit tolerances tol for f's type.
template <class Kernel, class Fn, class Run>
void train_each(const std::vector<Fn>& fns, const LeastSquares& problem, uint32_t seed, Run run) {
    if (!backend().has_optim8()) return;
    for (const auto& f : fns) {
        for (float wd : {0.0f, 0.01f}) {
            INFO(f.name << " weight_decay " << wd);
            const auto p0 = initial_params(problem.size(), seed, f.dtype);
            Kernel k(f, p0);
            run(k, wd, p0, tolerance32(f.dtype));
        }
    }
}

}  // namespace kbit_test
