document.getElementById("app").textContent = "Shop ready: " + location.pathname;
