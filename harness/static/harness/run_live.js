// A run's page while the run goes on: ask the console for the run's state every two seconds
// and reload the page when it changed (a step, an approval decided, the end), so that what
// happened shows without a manual reload. Stops when the run has ended or the page is hidden.
(function () {
  "use strict";
  const marker = document.querySelector(".run-live");
  if (!marker) return;
  const seen = [marker.dataset.status, marker.dataset.steps];
  const ended = new Set(["succeeded", "failed", "cancelled", "budget_exceeded", "step_limit", "deadline_exceeded"]);
  async function poll() {
    if (document.hidden) return schedule();
    try {
      const response = await fetch(marker.dataset.stateUrl, { credentials: "same-origin", headers: { Accept: "application/json" } });
      if (response.ok) {
        const state = await response.json();
        if (state.status !== seen[0] || String(state.steps) !== seen[1]) {
          window.location.reload();
          return;
        }
        if (ended.has(state.status)) return;
      }
    } catch (error) {
      // The server is away for a moment: try again at the next tick.
    }
    schedule();
  }
  function schedule() { window.setTimeout(poll, 2000); }
  schedule();
})();
