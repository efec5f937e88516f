console.log("bench: see issue 3");
