"""Hand-written vocabulary the task generators draw from (written for this project).

Kept apart from the gym modules so those read as environments. Each table's line format is given
above it; `generate.py` combines them with a seeded RNG into the shipped JSONL tasks.
"""
from __future__ import annotations

# Telepathy entities: "name|category|phrase:keyword;phrase:keyword;..."; fact text "It <phrase>."
# A keyword the agent's prompt hits is left out of the shipped task (generate.py), so a fact needs
# one the prompt lacks: "stars", not "star", which the system prompt's "starts" hits by prefix
# (a question saying "star" still hits "stars").
ENTITIES = """
Apple|fruit|is red or green:green;grows on trees:tree;is crunchy:crunchy
Banana|fruit|is yellow:yellow;is long and curved:curved;grows in the tropics:tropic
Strawberry|fruit|is red:red;has seeds on the outside:seeds;grows close to the ground:ground
Kiwi|fruit|is brown and fuzzy:fuzzy;has green flesh:green;is from New Zealand:zealand
Watermelon|fruit|is very large:large;has green skin and red flesh:red;is eaten in summer:summer
Lemon|fruit|is sour:sour;is yellow:yellow;is used for juice:juice
Grape|fruit|grows in bunches:bunch;is used to make wine:wine;is small:small
Pineapple|fruit|has a spiky skin:spiky;grows in the tropics:tropic;is yellow inside:yellow
Cherry|fruit|is small and red:red;has a stone:stone;grows on trees:tree
Mango|fruit|is orange inside:orange;grows in the tropics:tropic;has a large flat seed:seed
Coconut|fruit|has a hard shell:shell;contains water:water;grows on palm trees:palm
Pear|fruit|is shaped like a bell:bell;grows on trees:tree;is juicy:juicy
Peach|fruit|has fuzzy skin:fuzzy;has a stone:stone;is sweet:sweet
Blueberry|fruit|is blue:blue;is small:small;grows on bushes:bush
Avocado|fruit|is green:green;is used in guacamole:guacamole;has a large seed:seed
Carrot|vegetable|is orange:orange;grows underground:underground;is eaten by rabbits:rabbit
Potato|vegetable|grows underground:underground;is used for fries:fries;is brown:brown
Tomato|vegetable|is red:red;is used in sauce:sauce;is juicy:juicy
Onion|vegetable|makes you cry when cut:cry;has layers:layer;grows underground:underground
Broccoli|vegetable|is green:green;looks like a small tree:tree;is a healthy food:healthy
Pumpkin|vegetable|is orange:orange;is carved at Halloween:halloween;is very large:large
Corn|vegetable|is yellow:yellow;grows on a cob:cob;is used for popcorn:popcorn
Garlic|vegetable|has a strong smell:smell;has cloves:clove;grows underground:underground
Lettuce|vegetable|is green:green;is used in salads:salad;has leaves:leaves
Pepper|vegetable|can be spicy:spicy;can be red or green:green;is hollow:hollow
Elephant|animal|is very large:large;has a trunk:trunk;lives in Africa or Asia:africa
Lion|animal|is a big cat:cat;has a mane:mane;lives in Africa:africa
Penguin|animal|is a bird:bird;cannot fly:fly;lives in cold places:cold
Dolphin|animal|lives in the ocean:ocean;is a mammal:mammal;is very intelligent:intelligent
Eagle|animal|is a bird:bird;can fly:fly;hunts other animals:hunt
Giraffe|animal|has a long neck:neck;lives in Africa:africa;is very tall:tall
Kangaroo|animal|jumps:jump;lives in Australia:australia;carries its young in a pouch:pouch
Shark|animal|lives in the ocean:ocean;has sharp teeth:teeth;is a fish:fish
Owl|animal|is a bird:bird;is awake at night:night;can fly:fly
Horse|animal|can be ridden:ridden;has a mane:mane;is a farm animal:farm
Cow|animal|gives milk:milk;is a farm animal:farm;eats grass:grass
Frog|animal|jumps:jump;lives near water:water;is green:green
Snake|animal|has no legs:legs;is a reptile:reptile;can be venomous:venom
Bee|animal|is an insect:insect;makes honey:honey;can fly:fly
Butterfly|animal|is an insect:insect;has colorful wings:wings;can fly:fly
Tiger|animal|is a big cat:cat;has stripes:stripe;lives in Asia:asia
Panda|animal|is black and white:black;eats bamboo:bamboo;lives in China:china
Octopus|animal|lives in the ocean:ocean;has eight arms:arms;can change color:color
Camel|animal|lives in the desert:desert;has humps:hump;can be ridden:ridden
Rabbit|animal|has long ears:ears;jumps:jump;eats carrots:carrot
Wolf|animal|lives in packs:pack;howls:howl;is related to dogs:dog
Turtle|animal|has a shell:shell;is a reptile:reptile;moves slowly:slow
Bat|animal|is a mammal:mammal;can fly:fly;is awake at night:night
Crocodile|animal|is a reptile:reptile;lives near water:water;has sharp teeth:teeth
Parrot|animal|is a bird:bird;can imitate speech:speech;is colorful:colorful
Bicycle|vehicle|has two wheels:wheel;is powered by pedals:pedal;has no engine:engine
Car|vehicle|has four wheels:wheel;has an engine:engine;drives on roads:road
Airplane|vehicle|can fly:fly;has wings:wings;carries passengers:passenger
Submarine|vehicle|travels underwater:underwater;is used by navies:navy;has a periscope:periscope
Helicopter|vehicle|can fly:fly;has rotors:rotor;can hover:hover
Train|vehicle|runs on rails:rail;has many carriages:carriage;carries passengers:passenger
Sailboat|vehicle|travels on water:water;is powered by the wind:wind;has a sail:sail
Motorcycle|vehicle|has two wheels:wheel;has an engine:engine;needs a helmet:helmet
Bus|vehicle|carries many passengers:passenger;drives on roads:road;has four or more wheels:wheel
Rocket|vehicle|goes to space:space;uses fuel:fuel;is very fast:fast
Skateboard|vehicle|has four small wheels:wheel;has no engine:engine;is ridden standing:standing
Tractor|vehicle|is used on farms:farm;has large wheels:wheel;has an engine:engine
Piano|instrument|has keys:keys;has strings inside:string;is large:large
Guitar|instrument|has strings:string;is played by strumming:strum;is made of wood:wood
Violin|instrument|has strings:string;is played with a bow:bow;is held under the chin:chin
Drum|instrument|is hit with sticks:stick;is a percussion instrument:percussion;is loud:loud
Flute|instrument|is blown:blow;is made of metal:metal;has holes:hole
Trumpet|instrument|is made of brass:brass;is blown:blow;has valves:valve
Harp|instrument|has many strings:string;is plucked:pluck;is large:large
Saxophone|instrument|is used in jazz:jazz;is blown:blow;is made of brass:brass
Cello|instrument|has strings:string;is played with a bow:bow;is played sitting down:sitting
Accordion|instrument|has keys:keys;is squeezed:squeez;has bellows:bellows
Harmonica|instrument|is small:small;is blown:blow;fits in a pocket:pocket
Xylophone|instrument|is hit with mallets:mallet;is a percussion instrument:percussion;has wooden bars:bar
Doctor|profession|works in a hospital:hospital;treats patients:patient;wears a white coat:coat
Teacher|profession|works in a school:school;teaches students:student;grades homework:homework
Firefighter|profession|puts out fires:fire;drives a red truck:truck;wears a helmet:helmet
Pilot|profession|flies airplanes:airplane;wears a uniform:uniform;works at airports:airport
Chef|profession|cooks food:cook;works in a restaurant:restaurant;wears a tall hat:hat
Farmer|profession|grows crops:crop;works outdoors:outdoor;raises animals:animal
Astronaut|profession|goes to space:space;wears a spacesuit:spacesuit;trains for years:train
Police officer|profession|enforces the law:law;wears a uniform:uniform;drives a patrol car:patrol
Dentist|profession|works on teeth:teeth;works in a clinic:clinic;uses a drill:drill
Carpenter|profession|works with wood:wood;uses a hammer:hammer;builds furniture:furniture
Lawyer|profession|works in courts:court;defends clients:client;studies the law:law
Baker|profession|makes bread:bread;starts work very early:early;uses an oven:oven
Football|sport|is played with a ball:ball;has teams of eleven:eleven;uses goals:goal
Tennis|sport|is played with a racket:racket;is played on a court:court;uses a net:net
Basketball|sport|is played with a ball:ball;uses a hoop:hoop;is played indoors:indoor
Swimming|sport|is done in water:water;uses a pool:pool;is an Olympic sport:olympic
Golf|sport|uses clubs:club;has holes:hole;is played on grass:grass
Boxing|sport|uses gloves:glove;happens in a ring:ring;is a combat sport:combat
Skiing|sport|is done on snow:snow;happens on mountains:mountain;uses poles:pole
Baseball|sport|is played with a bat:bat;uses a ball:ball;has innings:inning
Cycling|sport|uses a bicycle:bicycle;has long races:race;is an Olympic sport:olympic
Chess|sport|is played on a board:board;has kings and queens:king;is a game of strategy:strategy
Volleyball|sport|uses a net:net;is played with a ball:ball;can be played on sand:sand
Surfing|sport|is done on waves:wave;uses a board:board;happens at the ocean:ocean
Hammer|tool|is used to drive nails:nail;has a heavy head:heavy;is made of metal:metal
Scissors|tool|cuts paper:paper;has two blades:blade;is held in one hand:hand
Screwdriver|tool|turns screws:screw;has a handle:handle;is made of metal:metal
Saw|tool|cuts wood:wood;has teeth:teeth;is pushed back and forth:back
Ladder|tool|is used to climb:climb;has rungs:rung;can be folded:fold
Shovel|tool|digs holes:dig;is used in gardens:garden;has a long handle:handle
Wrench|tool|turns bolts:bolt;is made of metal:metal;is adjustable:adjust
Paintbrush|tool|is used to paint:paint;has bristles:bristle;is held in one hand:hand
Umbrella|tool|protects from rain:rain;can be folded:fold;has a handle:handle
Compass|tool|points north:north;is used for navigation:navigat;has a needle:needle
Telescope|tool|is used to see far away:far;is used to look at stars:stars;has lenses:lens
Thermometer|tool|measures temperature:temperature;is used when sick:sick;shows numbers:number
Sun|celestial body|is a star:stars;gives light:light;is very hot:hot
Moon|celestial body|orbits the Earth:orbit;has craters:crater;is seen at night:night
Mars|celestial body|is a planet:planet;is red:red;has two moons:moons
Jupiter|celestial body|is a planet:planet;is the largest planet:largest;has a great red spot:spot
Saturn|celestial body|is a planet:planet;has rings:ring;is made of gas:gas
Comet|celestial body|has a tail:tail;is made of ice:ice;orbits the sun:orbit
Venus|celestial body|is a planet:planet;is very hot:hot;is bright in the evening:evening
Japan|country|is in Asia:asia;is made of islands:island;has Tokyo as capital:tokyo
Brazil|country|is in South America:south america;speaks Portuguese:portuguese;has the Amazon:amazon
Egypt|country|is in Africa:africa;has pyramids:pyramid;has the Nile:nile
France|country|is in Europe:europe;has the Eiffel Tower:eiffel;is famous for wine:wine
Canada|country|is in North America:north america;is very cold in winter:cold;has a maple leaf flag:maple
Australia|country|is an island continent:continent;has kangaroos:kangaroo;is in the southern hemisphere:southern
India|country|is in Asia:asia;has the Taj Mahal:taj;has a very large population:population
Italy|country|is in Europe:europe;is shaped like a boot:boot;is famous for pasta:pasta
Mexico|country|is in North America:north america;speaks Spanish:spanish;has ancient pyramids:pyramid
Norway|country|is in Europe:europe;has fjords:fjord;is very cold:cold
Kenya|country|is in Africa:africa;has safaris:safari;has Nairobi as capital:nairobi
China|country|is in Asia:asia;has the Great Wall:wall;has a very large population:population
Peru|country|is in South America:south america;has Machu Picchu:machu;has llamas:llama
Iceland|country|is in Europe:europe;has volcanoes:volcano;is an island:island
Greece|country|is in Europe:europe;has ancient temples:temple;has many islands:island
"""

# Turtle stories: (title, surface, bottom, [(clue text, keywords)]); {name} and {place} are filled in.
STORIES = [
    ("The Glass of Water",
     "{name} walks into a {place} and asks for a glass of water. The owner points a gun at {name}. {name} says thank you and leaves.",
     "{name} had the hiccups. The owner saw it and scared {name} with the gun, and the fright cured the hiccups, so no water was needed.",
     [("{name} had the hiccups.", ("hiccup",)), ("The gun was meant to scare.", ("scare", "fright", "surprise")),
      ("The fright cured the problem.", ("cure", "stop", "cured"))]),
    ("The Seventh Floor",
     "{name} lives on the tenth floor. Every morning the elevator takes {name} down, but in the evening {name} rides only to the seventh floor and walks up, except on rainy days.",
     "{name} is very short and can only reach the button for the seventh floor. On rainy days {name} carries an umbrella and presses the tenth button with it.",
     [("{name} is very short.", ("short", "height", "small")), ("{name} cannot reach the higher button.", ("button", "reach")),
      ("The umbrella helps reach the button.", ("umbrella",))]),
    ("The Bankrupt Hotel",
     "{name} pushes a car to a hotel and tells the owner: I am bankrupt.",
     "{name} is playing a board game of Monopoly. The car is a game token that landed on a hotel square the player cannot pay for.",
     [("It is a board game.", ("game", "board")), ("The game is Monopoly.", ("monopoly",)),
      ("The car is a game piece.", ("piece", "token"))]),
    ("The Dinner After",
     "{name} shoots a friend, holds the friend under water for five minutes, then hangs the friend. An hour later they have dinner together at the {place}.",
     "{name} is a photographer: shooting means taking a picture, developing it in water in a darkroom, then hanging the print to dry.",
     [("The shot is a photograph.", ("photo", "camera", "picture")), ("The water is for developing film.", ("develop", "darkroom")),
      ("Hanging is drying the print.", ("dry", "print"))]),
    ("The Unopened Package",
     "{name} is found dead in a field near the {place}. Next to the body lies an unopened package.",
     "{name} jumped from a plane and the parachute in the package failed to open.",
     [("{name} jumped from a plane.", ("plane", "jump", "sky")), ("The package is a parachute.", ("parachute",)),
      ("It failed to open.", ("fail", "open"))]),
    ("Two Bodies",
     "Two bodies lie on the floor of a room in the {place}, in a puddle of water among broken glass. {name} is shocked.",
     "The bodies are goldfish. {name}'s cat knocked their bowl off the table, and it broke.",
     [("The dead are fish.", ("fish", "goldfish")), ("The glass was a bowl.", ("bowl",)),
      ("A cat knocked it over.", ("cat", "knock"))]),
    ("Half a Match",
     "{name} is found dead in the desert, holding half a match.",
     "{name} was in a hot-air balloon that was losing height. The passengers drew matches to decide who must jump to lighten it, and {name} drew the short one.",
     [("There was a balloon.", ("balloon",)), ("They drew lots with matches.", ("lots", "draw", "straw")),
      ("Someone had to jump to lose weight.", ("jump", "weight", "lighten"))]),
    ("The Dark Tower",
     "{name} switches off a lamp one night near the {place}. The next morning {name} hears the news and falls into despair.",
     "{name} was a lighthouse keeper. With the light off, a ship crashed on the rocks in the night, and {name} felt to blame.",
     [("It was a lighthouse.", ("lighthouse", "beacon")), ("A ship crashed.", ("ship", "wreck", "boat")),
      ("{name} felt guilty.", ("guilt", "blame", "fault"))]),
    ("The Soup",
     "{name} orders a bowl of seabird soup at a {place}, tastes it, and goes home deeply shaken.",
     "Years before, {name} was stranded after a shipwreck and was fed what others called seabird soup. Tasting the real one, {name} understood it had been a lost companion.",
     [("There had been a shipwreck.", ("shipwreck", "stranded", "island")), ("{name} had been lied to.", ("lie", "lied", "told")),
      ("The earlier soup was made from a person.", ("person", "human", "companion"))]),
    ("New Shoes",
     "{name} buys a new pair of shoes, goes to work at the {place} the next day, and is badly hurt.",
     "{name} is the assistant of a knife thrower in a circus. The new shoes had higher heels, so {name} stood taller than the thrower expected.",
     [("{name} works in a circus act.", ("circus", "act", "show")), ("A knife thrower was involved.", ("knife", "thrower")),
      ("The heels made {name} taller.", ("heel", "taller", "height"))]),
    ("The Puddle",
     "{name} is found hanging in an empty room of the {place}. There is nothing in the room but a puddle of water.",
     "{name} stood on a block of ice to reach the rope. The ice melted away and left only the puddle.",
     [("There was a block of ice.", ("ice",)), ("The ice melted.", ("melt",)),
      ("{name} stood on it to reach the rope.", ("stood", "stand", "rope"))]),
    ("The Surgeon",
     "{name} and a parent crash on the way to the {place}. At the hospital the surgeon says: I cannot operate, this is my child.",
     "The surgeon is {name}'s other parent, the mother. The riddle plays on the assumption that a surgeon is a man.",
     [("The surgeon is the mother.", ("mother", "mom")), ("The surgeon is a woman.", ("woman", "female")),
      ("The surgeon is the other parent.", ("other parent",))]),
]
NAMES = ["Alex", "Sam", "Robin", "Jordan", "Taylor", "Morgan", "Casey", "Jamie", "Riley", "Avery", "Quinn", "Dana"]
PLACES = ["bar", "cafe", "diner", "hotel", "station", "harbor", "museum", "market", "theater", "library", "garage"]

# Persuade claims: (claim, [(concern text, keywords)]) -- the user's reasons for holding the claim.
CLAIMS = [
    ("Homework should be mandatory in primary school",
     [("Homework builds discipline and good habits.", ("discipline", "habit")),
      ("Practice at home improves grades.", ("grade", "practice")),
      ("Parents see what their children are learning.", ("parent", "involve")),
      ("Without homework children spend more time on screens.", ("screen", "phone")),
      ("Teachers need homework to check understanding.", ("teacher", "assess"))]),
    ("Cities should ban cars from their centers",
     [("Cars pollute the air.", ("pollut", "air")), ("Streets would be safer for pedestrians.", ("safe", "pedestrian")),
      ("Traffic noise harms health.", ("noise", "health")), ("Public transport would improve.", ("transport", "transit")),
      ("Shops gain more foot traffic.", ("shop", "business"))]),
    ("Social media does more harm than good",
     [("It harms teenagers' mental health.", ("mental", "teen")), ("It spreads misinformation.", ("misinformation", "fake")),
      ("It is addictive.", ("addict", "time")), ("It invades privacy.", ("privacy", "data")),
      ("It polarizes politics.", ("polariz", "politic"))]),
    ("Nuclear power should replace coal",
     [("Nuclear power emits little carbon.", ("carbon", "climate")), ("Coal kills through air pollution.", ("pollut", "air")),
      ("Nuclear plants run all day and night.", ("reliab", "baseload")), ("Modern reactors are safe.", ("safe", "reactor")),
      ("Nuclear fuel is compact.", ("fuel", "land"))]),
    ("School uniforms should be required",
     [("Uniforms reduce bullying about clothes.", ("bully", "cloth")), ("Uniforms save families money.", ("money", "cost")),
      ("Uniforms build school identity.", ("identity", "pride")), ("Mornings are simpler with uniforms.", ("morning", "time")),
      ("Uniforms improve focus on learning.", ("focus", "distract"))]),
    ("Remote work is better than office work",
     [("Remote work removes the commute.", ("commute", "travel")), ("People are more productive at home.", ("productiv", "output")),
      ("Companies save on office costs.", ("rent", "cost")), ("Remote work gives flexibility.", ("flexib", "family")),
      ("It lets firms hire from anywhere.", ("hire", "talent"))]),
    ("Zoos should be closed",
     [("Animals suffer in captivity.", ("captiv", "suffer")), ("Enclosures are too small.", ("space", "enclosure")),
      ("Zoos exist mainly for profit.", ("profit", "money")), ("Animals can be seen in the wild or online.", ("wild", "documentar")),
      ("Breeding programs rarely release animals.", ("breed", "release"))]),
    ("Voting should be compulsory",
     [("Compulsory voting raises turnout.", ("turnout", "participat")), ("Results reflect the whole population.", ("represent", "population")),
      ("It reduces extreme campaigning.", ("extreme", "campaign")), ("Voting is a civic duty.", ("duty", "civic")),
      ("Fines are small and easy to handle.", ("fine", "penalty"))]),
    ("Fast food should be taxed",
     [("Fast food causes obesity.", ("obes", "weight")), ("The tax funds health care.", ("health", "fund")),
      ("Prices shape eating habits.", ("price", "habit")), ("Sugar taxes have worked before.", ("sugar", "evidence")),
      ("Healthy food becomes relatively cheaper.", ("healthy", "cheap"))]),
    ("Space exploration is worth its cost",
     [("Space research creates new technology.", ("technolog", "invent")), ("It inspires young scientists.", ("inspir", "student")),
      ("Satellites serve daily life.", ("satellite", "gps")), ("Humanity needs a backup planet.", ("backup", "survival")),
      ("It produces scientific knowledge.", ("scien", "knowledge"))]),
    ("Video games are good for children",
     [("Games improve problem solving.", ("problem", "solv")), ("Games teach teamwork online.", ("team", "cooperat")),
      ("Games build hand-eye coordination.", ("coordinat", "reflex")), ("Games can be educational.", ("educat", "learn")),
      ("Games are a way to relax.", ("relax", "stress"))]),
    ("Public transport should be free",
     [("Free transport cuts car traffic.", ("traffic", "congest")), ("It helps poorer households.", ("poor", "income")),
      ("It lowers emissions.", ("emission", "pollut")), ("Ticketing costs would disappear.", ("ticket", "cost")),
      ("Cities become more accessible.", ("access", "mobility"))]),
    ("Animal testing should be banned",
     [("Animals feel pain.", ("pain", "cruel")), ("Results often do not transfer to humans.", ("human", "transfer")),
      ("Alternatives exist.", ("alternativ", "cell")), ("Consumers reject tested products.", ("consumer", "buy")),
      ("Many tests are for cosmetics.", ("cosmetic", "beauty"))]),
    ("The school week should be four days",
     [("Students would be less tired.", ("tired", "rest")), ("Schools save on running costs.", ("cost", "budget")),
      ("Teachers would stay in the job.", ("teacher", "retention")), ("Families get more time together.", ("family", "time")),
      ("Attendance improves.", ("attendance", "absence"))]),
    ("Plastic bags should be banned",
     [("Bags pollute the oceans.", ("ocean", "marine")), ("Plastic takes centuries to break down.", ("degrad", "break")),
      ("Reusable bags work well.", ("reusable", "alternativ")), ("Animals eat plastic.", ("animal", "wildlife")),
      ("Bans have worked elsewhere.", ("ban", "evidence"))]),
    ("Tipping in restaurants should be abolished",
     [("Wages should not depend on tips.", ("wage", "salary")), ("Tipping allows discrimination.", ("discriminat", "bias")),
      ("Menu prices become honest.", ("price", "menu")), ("Tipping confuses tourists.", ("tourist", "confus")),
      ("Kitchen staff are left out.", ("kitchen", "staff"))]),
    ("Everyone should learn to code at school",
     [("Coding jobs are in demand.", ("job", "career")), ("Coding teaches logical thinking.", ("logic", "thinking")),
      ("Technology shapes every field.", ("technolog", "digital")), ("Early exposure narrows gender gaps.", ("gender", "gap")),
      ("Coding encourages creativity.", ("creativ", "build"))]),
    ("Daylight saving time should end",
     [("Clock changes disrupt sleep.", ("sleep", "tired")), ("Accidents rise after the change.", ("accident", "crash")),
      ("Energy savings are negligible.", ("energy", "electric")), ("It confuses scheduling.", ("schedul", "confus")),
      ("Health studies show harm.", ("health", "heart"))]),
    ("Museums should be free to enter",
     [("Culture should be open to all.", ("culture", "access")), ("Free entry raises visitor numbers.", ("visitor", "attendance")),
      ("Taxes already fund museums.", ("tax", "fund")), ("Education benefits from museum visits.", ("educat", "school")),
      ("Tourism brings money anyway.", ("touris", "spend"))]),
    ("Cash should be replaced by digital payments",
     [("Digital payments are convenient.", ("convenien", "easy")), ("Cash enables crime.", ("crime", "launder")),
      ("Printing money is costly.", ("print", "cost")), ("Digital records help taxes.", ("tax", "record")),
      ("Cards are more hygienic.", ("hygien", "germ"))]),
]

# Intention: (category, vague task with {x}, fillers for {x}, [(missing detail, keywords, options)]).
INTENTIONS = [
    ("Travel Planning", "Plan a trip to {x} for me.", ["Paris", "Tokyo", "Rome", "Lisbon", "Cairo", "Sydney", "Lima", "Oslo"],
     [("Travel dates", ("date", "when"), ["next month", "in the summer", "over the holidays"]),
      ("Budget", ("budget", "spend", "cost"), ["under 1000 dollars", "around 2000 dollars", "no fixed limit"]),
      ("Travel companions", ("who", "companion", "alone"), ["alone", "with my partner", "with two kids"]),
      ("Interests", ("interest", "activit", "enjoy"), ["museums", "food and markets", "hiking"]),
      ("Accommodation type", ("accommodat", "hotel", "stay"), ["a hostel", "a boutique hotel", "an apartment"])]),
    ("Cooking", "Give me a recipe for {x}.", ["soup", "pasta", "a curry", "a salad", "a cake", "bread", "a stir fry", "tacos"],
     [("Dietary restrictions", ("diet", "allerg", "vegetarian"), ["vegetarian", "gluten free", "no restrictions"]),
      ("Number of servings", ("serving", "people", "many"), ["two people", "four people", "a party of ten"]),
      ("Cooking time", ("time", "long", "quick"), ["under 30 minutes", "about an hour", "time does not matter"]),
      ("Skill level", ("skill", "experience", "beginner"), ["beginner", "intermediate", "experienced"]),
      ("Available equipment", ("equipment", "oven", "tool"), ["only a stove", "an oven", "a slow cooker"])]),
    ("Fitness", "Make me a workout plan for {x}.", ["running", "strength", "weight loss", "flexibility", "swimming", "cycling", "a marathon", "boxing"],
     [("Current fitness level", ("level", "fit", "beginner"), ["beginner", "moderately fit", "very fit"]),
      ("Days per week", ("days", "week", "often"), ["two days", "three days", "five days"]),
      ("Equipment access", ("equipment", "gym", "home"), ["no equipment", "a home gym", "a full gym"]),
      ("Injuries", ("injur", "pain", "health"), ["a bad knee", "back pain", "no injuries"]),
      ("Session length", ("long", "session", "minutes"), ["20 minutes", "45 minutes", "90 minutes"])]),
    ("Shopping", "Recommend a {x} for me.", ["laptop", "phone", "camera", "bike", "tent", "backpack", "watch", "printer"],
     [("Budget", ("budget", "price", "spend"), ["under 300 dollars", "around 800 dollars", "over 1500 dollars"]),
      ("Main use", ("use", "purpose", "need"), ["work", "travel", "a gift"]),
      ("Preferred brand", ("brand", "maker"), ["no preference", "a well known brand", "an eco friendly brand"]),
      ("Size preference", ("size", "small", "large"), ["compact", "standard", "large"]),
      ("Color", ("color", "colour"), ["black", "silver", "bright colors"])]),
    ("Writing", "Write a {x} for me.", ["cover letter", "wedding speech", "blog post", "poem", "product description", "thank you note", "short story", "newsletter"],
     [("Audience", ("audience", "reader", "who"), ["my manager", "close friends", "customers"]),
      ("Tone", ("tone", "formal", "style"), ["formal", "funny", "warm"]),
      ("Length", ("length", "long", "words"), ["under 200 words", "about one page", "as long as needed"]),
      ("Key points", ("point", "include", "mention"), ["my experience", "a personal story", "the main benefits"]),
      ("Deadline", ("deadline", "when", "due"), ["today", "this week", "no rush"])]),
    ("Learning", "Teach me {x}.", ["Spanish", "the guitar", "photography", "statistics", "chess", "drawing", "Python", "public speaking"],
     [("Current level", ("level", "know", "experience"), ["complete beginner", "some basics", "intermediate"]),
      ("Learning goal", ("goal", "why", "purpose"), ["for travel", "for my job", "for fun"]),
      ("Time available", ("time", "hours", "week"), ["one hour a week", "an hour a day", "weekends only"]),
      ("Preferred method", ("method", "video", "book"), ["videos", "books", "hands-on practice"]),
      ("Pace", ("pace", "fast", "slow"), ["slow and steady", "intensive", "flexible"])]),
    ("Events", "Help me organize a {x}.", ["birthday party", "team dinner", "picnic", "baby shower", "reunion", "game night", "charity run", "book club"],
     [("Number of guests", ("guest", "people", "many"), ["ten guests", "thirty guests", "over a hundred guests"]),
      ("Date", ("date", "when", "day"), ["this Saturday", "next month", "in spring"]),
      ("Venue", ("venue", "where", "place"), ["at home", "a restaurant", "a park"]),
      ("Budget", ("budget", "cost", "spend"), ["300 dollars", "1000 dollars", "as cheap as possible"]),
      ("Food", ("food", "catering", "menu"), ["pizza", "a buffet", "potluck"])]),
    ("Home", "Help me redecorate my {x}.", ["living room", "bedroom", "kitchen", "office", "bathroom", "balcony", "hallway", "garden"],
     [("Style", ("style", "look", "modern"), ["modern", "rustic", "minimalist"]),
      ("Budget", ("budget", "spend", "cost"), ["under 500 dollars", "about 2000 dollars", "flexible"]),
      ("Room size", ("size", "big", "large"), ["small", "medium", "large"]),
      ("Colors", ("color", "colour", "palette"), ["neutral tones", "bold colors", "pastels"]),
      ("Timeline", ("timeline", "when", "finish"), ["this weekend", "within a month", "no deadline"])]),
    ("Finance", "Help me save money for {x}.", ["a house", "a car", "retirement", "a wedding", "travel", "college", "an emergency fund", "a business"],
     [("Target amount", ("amount", "much", "target"), ["10000 dollars", "50000 dollars", "not sure yet"]),
      ("Timeframe", ("timeframe", "when", "years"), ["one year", "five years", "ten years"]),
      ("Monthly income", ("income", "earn", "salary"), ["3000 dollars a month", "6000 dollars a month", "irregular income"]),
      ("Risk tolerance", ("risk", "invest", "safe"), ["very safe", "moderate risk", "high risk"]),
      ("Existing debt", ("debt", "loan", "owe"), ["no debt", "a student loan", "credit card debt"])]),
]
