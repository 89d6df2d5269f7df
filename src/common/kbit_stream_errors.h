// kbit_stream_errors.h — errors that a stream-ordered call can only find on the device (an expert id out
// of range in kbit_gemm_4bit_grouped), held by the backend until the next kbit_stream_synchronize of the
// call's stream reports them (behaviour §10.6). A backend wraps each call's device-side record in its own
// PendingCheck and adds it here; its stream_synchronize, once the stream is idle, calls take(): the first
// failed check of that stream, in call order, becomes the synchronize's status and message, and every
// finished check of the stream is forgotten.
#pragma once

#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "kbit/kbit_core.h"

namespace kbit {

// One call's check as a backend holds it (a device record, the event that says it is written).
class PendingCheck {
public:
    virtual ~PendingCheck() = default;
    // Whether the device has written the record (does not wait).
    virtual bool done() = 0;
    // After done(): whether the call found an error.
    virtual bool failed() = 0;
    // After failed(): records the error as the thread's last error (set_error) and returns its status.
    virtual kbit_status report() = 0;
};

class StreamErrors {
public:
    // Holds `check` for `stream`. Checks of any stream that are done and found nothing are dropped
    // first, so a caller that never synchronizes holds only its unfinished or failed ones.
    void add(void* stream, std::unique_ptr<PendingCheck> check) {
        std::lock_guard<std::mutex> lock(mutex_);
        std::vector<Entry> kept;
        kept.reserve(checks_.size() + 1);
        for (Entry& e : checks_)
            if (!(e.second->done() && !e.second->failed())) kept.push_back(std::move(e));
        kept.emplace_back(stream, std::move(check));
        checks_ = std::move(kept);
    }

    // After `stream` went idle: the first failed check of `stream` (its status, its message recorded),
    // else KBIT_STATUS_SUCCESS; the stream's finished checks are forgotten either way (reported once).
    kbit_status take(void* stream) {
        std::vector<Entry> mine;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            std::vector<Entry> kept;
            for (Entry& e : checks_) (e.first == stream && e.second->done() ? mine : kept).push_back(std::move(e));
            checks_ = std::move(kept);
        }
        for (Entry& e : mine)
            if (e.second->failed()) return e.second->report();
        return KBIT_STATUS_SUCCESS;
    }

private:
    using Entry = std::pair<void*, std::unique_ptr<PendingCheck>>;
    std::mutex mutex_;
    std::vector<Entry> checks_;  // in call order
};

// The backend library's one registry.
inline StreamErrors& stream_errors() {
    static StreamErrors* errors = new StreamErrors;  // never destroyed: a synchronize may run during exit
    return *errors;
}

}  // namespace kbit
